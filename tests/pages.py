"""Reading pages in tests as a person reads them."""

import re


def page_text(response) -> str:
    """A page's text, its tags (`<code>`, `translate="no"` spans) gone and its white space folded."""
    return " ".join(re.sub(r"<[^>]+>", "", response.content.decode()).split())
