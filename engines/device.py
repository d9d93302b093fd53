"""Which torch device model work runs on, chosen at run time.

`EVALHUB_DEVICE` (e.g. "cpu", "cuda", "cuda:1") overrides; otherwise CUDA when present.
"""

from __future__ import annotations

import os


def device_select() -> str:
    forced = os.environ.get("EVALHUB_DEVICE", "").strip()
    if forced:
        return forced
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
