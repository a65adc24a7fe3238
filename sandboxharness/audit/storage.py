"""The only file I/O of the audit layer: capped reads, durable appends, locking.

OSError never escapes: user-supplied files turn into ``InputError`` (exit 2), the log's
own files into ``AuditError``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ..errors import AuditError, InputError


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
            write_all(fd, data)
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


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextmanager
def locked(lock_path: Path, *, shared: bool = False) -> Iterator[None]:
    """``flock`` on a sidecar lock file (created when taking the exclusive lock)."""
    try:
        if shared:
            fd = os.open(lock_path, os.O_RDONLY)
        else:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if shared:  # a read-only copy of the log has no lock file: nothing to wait for
            yield
            return
        raise AuditError(f"{lock_path}: cannot open lock file: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class AppendFile:
    """An ``O_APPEND`` file handle that can be truncated and fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.created = not path.exists()
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise AuditError(f"{path}: cannot open for append: {exc.strerror}") from None

    def read_all(self, cap: int) -> bytes:
        size = os.fstat(self.fd).st_size
        if size > cap:
            raise AuditError(f"{self.path}: {size} bytes, over the {cap}-byte limit")
        return os.pread(self.fd, size, 0)

    def truncate(self, length: int) -> None:
        os.ftruncate(self.fd, length)
        os.fsync(self.fd)

    def append(self, data: bytes) -> None:
        try:
            write_all(self.fd, data)
            os.fsync(self.fd)
        except OSError as exc:
            raise AuditError(f"{self.path}: append failed: {exc.strerror}") from None

    def close(self) -> None:
        os.close(self.fd)


def quarantine(torn_path: Path, source: Path, offset: int, data: bytes) -> None:
    """Keep bytes a repair cuts off (never silently delete evidence): one JSON line each."""
    entry = {"at": datetime.now(UTC).isoformat(), "file": source.name, "offset": offset,
             "data_b64": base64.b64encode(data).decode()}
    created = not torn_path.exists()
    fd = os.open(torn_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        write_all(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:  # durable before the caller truncates the original
        fsync_dir(torn_path.parent)
