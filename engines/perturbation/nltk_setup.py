"""Points NLTK at the project's own data (`data/nltk_data`), before textattack is imported.

`import textattack` reads NLTK's English stopwords at import time and NLTK's own copy is a download.
The shipped folder goes first in `NLTK_DATA`, which NLTK reads when it is imported (child processes
inherit it); if NLTK is already imported, it goes first in `nltk.data.path` too. Folders a user
configured are still searched, after it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NLTK_DATA_DIR = Path(__file__).resolve().parent / "data" / "nltk_data"


def nltk_data_setup() -> None:
    folder = str(NLTK_DATA_DIR)
    configured = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p and p != folder]
    os.environ["NLTK_DATA"] = os.pathsep.join([folder, *configured])
    nltk_data = sys.modules.get("nltk.data")
    if nltk_data is not None and folder not in nltk_data.path:
        nltk_data.path.insert(0, folder)
