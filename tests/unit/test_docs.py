"""The README documents every stable reason code, and SECURITY.md's tests exist."""

from __future__ import annotations

import re

from sandboxharness.models import ReasonCode
from tests.conftest import REPO


def test_readme_lists_every_reason_code() -> None:
    readme = (REPO / "README.md").read_text()
    missing = [c.value for c in ReasonCode if f"| `{c.value}` |" not in readme]
    assert not missing


def test_security_table_names_tests_that_exist() -> None:
    text = (REPO / "SECURITY.md").read_text()
    corpus = "\n".join(p.read_text() for p in (REPO / "tests").rglob("test_*.py"))
    names = set(re.findall(r"`(?:[\w/]+\.py::)?(test_\w+)`", text))
    assert names, "SECURITY.md names no tests"
    missing = sorted(n for n in names if f"def {n}" not in corpus)
    assert not missing, missing
    for path, name in re.findall(r"`([\w/]+\.py)::(test_\w+)`", text):  # the named file
        target = REPO / path
        assert target.is_file() and f"def {name}" in target.read_text(), f"{path}::{name}"
