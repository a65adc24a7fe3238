"""The one writer of candidate sources (analysers and every sandboxed job): never through a
link, never over a file already there, never outside its directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandboxharness._internal.files import write_sources
from sandboxharness.errors import ToolError


def test_writes_nested_sources_with_the_given_mode(tmp_path: Path) -> None:
    assert write_sources(tmp_path, [("a/b.py", b"x = 1\n")], mode=0o600) == ["a/b.py"]
    assert (tmp_path / "a" / "b.py").read_bytes() == b"x = 1\n"
    assert (tmp_path / "a" / "b.py").stat().st_mode & 0o777 == 0o600 & ~_umask()


def test_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    root = tmp_path / "src"
    root.mkdir()
    (root / "main.py").symlink_to(outside)
    with pytest.raises(FileExistsError):
        write_sources(root, [("main.py", b"evil")])
    assert outside.read_text() == "keep"


def test_an_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    write_sources(tmp_path, [("main.py", b"one")])
    with pytest.raises(FileExistsError):
        write_sources(tmp_path, [("main.py", b"two")])
    assert (tmp_path / "main.py").read_bytes() == b"one"


@pytest.mark.parametrize("name", ["../escape.py", "/etc/passwd", "a/../../b.py"])
def test_paths_leaving_the_directory_are_a_harness_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(ToolError, match="unsafe source path"):
        write_sources(tmp_path / "src", [(name, b"x")])
    assert not (tmp_path / "escape.py").exists()


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
