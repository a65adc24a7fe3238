"""Writing candidate sources to disk: the one careful way, for the analysers and every job."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ..errors import ToolError


def write_sources(root: Path, files: Iterable[tuple[str, bytes]], *,
                  mode: int = 0o644) -> list[str]:
    """Write ``(relative path, bytes)`` under ``root``: never through a link, never over a
    file already there, never outside ``root``. ``mode`` 0644: the sandbox's unprivileged
    uid reads them; 0600 for the host's own analysers."""
    written = []
    for name, data in files:
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts:  # validated already; never trust twice-read
            raise ToolError(f"unsafe source path {name!r} reached a job directory")
        target = root.joinpath(*rel.parts)
        target.parent.mkdir(mode=mode | 0o100 | (mode & 0o044) >> 2, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        written.append(name)
    return written
