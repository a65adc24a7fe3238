"""The harness version a verdict and the resume key carry, installed or not."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_an_uninstalled_tree_is_versioned_by_its_sources(tmp_path: Path) -> None:
    """A checkout on a path entry (the device machine) has no distribution metadata: its
    version is a digest of the package's sources, and changes when a source does."""
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "sandboxharness", tree / "sandboxharness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import importlib.metadata as m\n"
            "def nope(_):\n    raise m.PackageNotFoundError\n"
            "m.version = nope\n"
            "from sandboxharness._internal.host import harness_version\n"
            "print(harness_version())")

    def version() -> str:
        out = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True,
                             text=True, check=True)
        return out.stdout.strip()

    first = version()
    assert re.fullmatch(r"0\+src\.[0-9a-f]{12}", first)
    assert version() == first
    target = tree / "sandboxharness" / "errors.py"
    target.write_text(target.read_text() + "\n# changed\n")
    assert version() != first
