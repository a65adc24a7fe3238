"""The only file I/O of the audit layer: directory-relative opens that refuse symbolic
links, capped reads, durable appends, ``flock``.

OSError never escapes: user-supplied files turn into ``InputError`` (exit 2), the log's
own files into ``AuditError`` naming the file and what failed.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..errors import AuditError, InputError
from .inputs import create_exclusive, fsync_dir, read_bytes, read_optional, read_text_file

__all__ = ["LogDir", "append", "create_exclusive", "flock", "fsync_dir", "iter_chunks",
           "open_input", "open_optional", "oserror", "pread", "quarantine", "read_bytes",
           "read_optional", "read_text_file", "truncate", "write_all", "write_raw"]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_SYMLINK = "is a symbolic link (refused: the log's files must be regular files)"


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return _SYMLINK
    return exc.strerror or exc.__class__.__name__


def oserror(where: object, action: str, exc: OSError) -> AuditError:
    """The one-line harness error for an OS error on one of the log's files."""
    return AuditError(f"{where}: {action}: {_reason(exc)}")


class LogDir:
    """The log's directory, opened once: every file is opened relative to this fd with
    ``O_NOFOLLOW``, so a symlink planted at a log path is refused, never followed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise AuditError(f"{path}: directory does not exist") from None
        except OSError as exc:
            raise oserror(path, "cannot open the log directory", exc) from None

    def where(self, name: str) -> Path:
        return self.path / name

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry itself (never what a symlink points to); None when absent. Anything
        but a regular file is refused."""
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise oserror(self.where(name), "cannot stat", exc) from None
        if stat.S_ISLNK(st.st_mode):
            raise AuditError(f"{self.where(name)}: {_SYMLINK}")
        if not stat.S_ISREG(st.st_mode):
            raise AuditError(f"{self.where(name)}: not a regular file")
        return st

    def open(self, name: str, flags: int, *, action: str, mode: int = 0o644) -> int:
        try:
            fd = os.open(name, flags | _NOFOLLOW, mode, dir_fd=self.fd)
        except OSError as exc:
            raise oserror(self.where(name), action, exc) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise AuditError(f"{self.where(name)}: not a regular file")
        return fd

    def read_optional(self, name: str, cap: int) -> bytes | None:
        """Up to ``cap`` bytes of ``name``; None when it does not exist (even if it vanished
        between a look and the open)."""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise oserror(self.where(name), "cannot read", exc) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise AuditError(f"{self.where(name)}: not a regular file")
            return pread(fd, cap, 0, self.where(name))
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        try:
            os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as exc:
            raise oserror(self.where(dst), "cannot replace", exc) from None

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise oserror(self.where(name), "cannot remove", exc) from None

    def fsync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as exc:
            raise oserror(self.path, "cannot fsync the directory", exc) from None

    def write_new(self, name: str, data: bytes, *, sync: bool) -> None:
        """Atomically replace ``name`` with ``data`` (temporary file + rename)."""
        tmp = f".{name}.{os.getpid()}.tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, action="cannot write")
        try:
            try:
                write_raw(fd, data)
                if sync:
                    os.fsync(fd)
            except OSError as exc:
                raise oserror(self.where(name), "cannot write", exc) from None
        finally:
            os.close(fd)
        try:
            self.replace(tmp, name)
        finally:
            self.unlink(tmp)
        if sync:
            self.fsync()

    def overwrite(self, name: str, data: bytes) -> None:
        """Rewrite ``name`` in place (no rename, no fsync: cheap, for a cache that may be
        lost or torn by a crash - its reader tolerates both)."""
        fd = self.open(name, os.O_WRONLY | os.O_CREAT, action="cannot write")
        try:
            try:
                if os.pwrite(fd, data, 0) != len(data):
                    raise OSError(errno.ENOSPC, "short write")
                os.ftruncate(fd, len(data))
            except OSError as exc:
                raise oserror(self.where(name), "cannot write", exc) from None
        finally:
            os.close(fd)

    def close(self) -> None:
        os.close(self.fd)


def write_raw(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` (the crash tests interpose here to die mid-write)."""
    write_raw(fd, data)


def append(fd: int, data: bytes, where: object) -> None:
    """Write and fsync: on return the bytes are on disk."""
    try:
        write_all(fd, data)
        os.fsync(fd)
    except OSError as exc:
        raise oserror(where, "append failed", exc) from None


def truncate(fd: int, length: int, where: object) -> None:
    try:
        os.ftruncate(fd, length)
        os.fsync(fd)
    except OSError as exc:
        raise oserror(where, f"cannot truncate to {length} bytes", exc) from None


def pread(fd: int, size: int, offset: int, where: object) -> bytes:
    try:
        return os.pread(fd, size, offset)
    except OSError as exc:
        raise oserror(where, "read failed", exc) from None


def flock(fd: int, operation: int, where: object) -> bool:
    """``flock``; False only for a non-blocking request that would block."""
    try:
        fcntl.flock(fd, operation)
    except BlockingIOError:
        return False
    except OSError as exc:
        raise oserror(where, "cannot lock", exc) from None
    return True


def open_optional(path: Path, *, what: str) -> int | None:
    """Open a log file for reading without following a symlink; None when it does not
    exist; other bad input -> InputError."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return None
    except PermissionError:
        raise InputError(f"{what} is not readable (permission denied)", where=str(path)) from None
    except OSError as exc:
        raise InputError(f"{what} could not be opened: {_reason(exc)}", where=str(path)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{what} is a directory, not a file" if stat.S_ISDIR(mode) else
                         f"{what} is not a regular file", where=str(path))
    return fd


def open_input(path: Path, *, what: str) -> int:
    """Like :func:`open_optional`; a missing file is an InputError."""
    fd = open_optional(path, what=what)
    if fd is None:
        raise InputError(f"{what} not found", where=str(path))
    return fd


def iter_chunks(fd: int, end: int, where: object, chunk: int = 4 << 20,
                start: int = 0) -> Iterator[bytes]:
    """The bytes [start, end) of a file, in chunks (bounded memory)."""
    pos = start
    while pos < end:
        data = pread(fd, min(chunk, end - pos), pos, where)
        if not data:
            return  # the file shrank under us: stop where it ends
        pos += len(data)
        yield data


def quarantine(d: LogDir, torn_name: str, source: str, offset: int, data: bytes) -> None:
    """Keep bytes a repair cuts off (never silently delete evidence): one JSON line each,
    durable before the caller truncates the original."""
    entry = {"at": datetime.now(UTC).isoformat(), "file": source, "offset": offset,
             "data_b64": base64.b64encode(data).decode()}
    created = d.lstat(torn_name) is None
    fd = d.open(torn_name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, action="cannot open")
    try:
        append(fd, (json.dumps(entry, sort_keys=True) + "\n").encode(), d.where(torn_name))
    finally:
        os.close(fd)
    if created:
        d.fsync()
