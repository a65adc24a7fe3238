"""Files the user hands in (keys, checkpoints, bundles): capped reads, one-line
``InputError`` for anything wrong with them; and creating key files atomically."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


def read_bytes(path: Path, cap: int, *, what: str) -> bytes:
    """Whole file, refusing anything bigger than ``cap``."""
    data = read_optional(path, cap, what=what, missing_ok=False)
    if data is None:  # pragma: no cover - read_optional raised already
        raise InputError(f"{what} not found", where=str(path))
    return data


def read_optional(path: Path, cap: int, *, what: str, missing_ok: bool = True) -> bytes | None:
    """Like :func:`read_bytes`; a missing file gives None when ``missing_ok``."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > cap:
                raise InputError(f"{what} is {size} bytes, over the {cap}-byte limit",
                                 where=str(path))
            return fh.read(cap + 1)[:cap]
    except FileNotFoundError:
        if missing_ok:
            return None
        raise InputError(f"{what} not found", where=str(path)) from None
    except IsADirectoryError:
        raise InputError(f"{what} is a directory, not a file", where=str(path)) from None
    except PermissionError:
        raise InputError(f"{what} is not readable (permission denied)", where=str(path)) from None
    except OSError as exc:
        raise InputError(f"{what} could not be read: {exc.strerror}", where=str(path)) from None


def read_text_file(path: Path, cap: int, *, what: str) -> str:
    data = read_bytes(path, cap, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{what} is not UTF-8 text", where=str(path)) from None


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_exclusive(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` with ``data`` atomically (never a half-written file); fail if it exists."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            os.fchmod(fd, mode)
            _write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise InputError("refusing to overwrite an existing file", where=str(path)) from None
        fsync_dir(path.parent)
    except OSError as exc:
        raise InputError(f"could not create file: {exc.strerror}", where=str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)




def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
