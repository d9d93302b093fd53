"""Whether an answer is right: label matching, and BERTScore / chrF for free text."""
