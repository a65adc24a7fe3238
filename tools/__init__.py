"""Development tools for the repository's data (``kernels/``); not part of the library.

Run from the repository root, e.g. ``python -m tools.build_corpus --check``.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "kernels"
