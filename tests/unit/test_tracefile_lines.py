"""The one reader of the dataset's JSON-lines files (traces, stored verdicts, resume)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.dataset.tracefile import whole_lines
from sandboxharness.errors import InputError


def test_whole_lines_skips_blanks_and_a_torn_tail(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_bytes(b'{"a": 1}\n\n  \n{"b": 2}\n{"c": 3')  # a crash mid-append
    assert list(whole_lines(f, 64)) == [(1, b'{"a": 1}\n'), (4, b'{"b": 2}\n')]


def test_a_line_over_the_cap_is_refused_or_skipped_whole(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_bytes(b"x" * 100 + b"\n" + b'{"ok": 1}\n')
    with pytest.raises(InputError, match=r"over the 16-byte cap") as err:
        list(whole_lines(f, 16))
    assert err.value.where == f"{f}:1"
    # lenient (resume): the long line is read past in bounded pieces, the next one is whole
    assert list(whole_lines(f, 16, strict=False)) == [(2, b'{"ok": 1}\n')]
