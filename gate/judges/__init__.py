"""Pure gate logic: statistics, policies, layer summaries and the verdict. No Django here."""
