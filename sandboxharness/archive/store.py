"""The content-addressed store: every object at ``ROOT/sha256/<2 hex>/<62 hex>``, named by the
SHA-256 of its bytes, written once and never changed.

Writes are atomic (a private temporary file, fsynced, made read-only, then hard-linked into
place: a reader sees the whole object or none, and an object already there is never
replaced). Reads re-hash what they return, so a changed byte is an error, never an artifact.
The layout is plain keys under a prefix, so it maps onto an object store as it is. Nothing
read from here is ever executed: objects are bytes handed to a reviewer.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import InfrastructureError, InputError, VerificationError

HASH = re.compile(r"^sha256:([0-9a-f]{64})$")
OBJECTS = "sha256"
TMP = "tmp"
_CHUNK = 1 << 20


class ArchiveError(InfrastructureError):
    """The archive could not be written or read (disk, permissions, a size cap)."""


class ArchiveIntegrityError(VerificationError):
    """An archived object is missing or its bytes no longer hash to its name."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_object_bytes: int = 256 << 20
    """Largest single artifact (the largest log a policy can capture)."""
    max_total_bytes: int = 64 << 30
    """The whole archive: a write that would pass it fails (``archive gc`` makes room)."""


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def parse_hash(text: str) -> str:
    """``sha256:<hex>`` (or the bare hex) in its one form; anything else is bad input."""
    tag = text if text.startswith("sha256:") else "sha256:" + text
    if not HASH.match(tag):
        raise InputError("not a sha256 hash (sha256:<64 hex>)", where=text[:80])
    return tag


def _open_object(path: Path) -> int | None:
    """A read descriptor on a regular file, never through a symlink; None when absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ArchiveIntegrityError(f"{path}: cannot be opened ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArchiveIntegrityError(f"{path}: not a regular file")
    return fd


class Archive:
    """One archive folder. Safe for threads and for several processes writing at once."""

    def __init__(self, root: str | Path, limits: ArchiveLimits | None = None, *,
                 create: bool = False) -> None:
        self.root = Path(root)
        self.limits = limits or ArchiveLimits()
        self._lock = threading.Lock()
        self._total: int | None = None
        if create:
            if not self.root.parent.is_dir():
                raise InputError("directory does not exist", where=str(self.root.parent))
            try:
                for sub in (OBJECTS, TMP, "refs/verdicts"):
                    (self.root / sub).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ArchiveError(f"{self.root}: cannot create the archive "
                                   f"({exc.strerror})") from None
        if self.root.is_symlink() or not (self.root / OBJECTS).is_dir():
            raise InputError("not an archive (no sha256/ folder)", where=str(self.root))

    def path_of(self, digest: str) -> Path:
        hexd = parse_hash(digest).removeprefix("sha256:")
        return self.root / OBJECTS / hexd[:2] / hexd[2:]

    def has(self, digest: str) -> bool:
        return os.path.lexists(self.path_of(digest))

    def put(self, data: bytes) -> str:
        """Store ``data``; its ``sha256:<hex>``. An object already there is kept as it is
        (write-once) and its time refreshed, so retention counts from its latest use."""
        digest = digest_of(data)
        path = self.path_of(digest)
        if len(data) > self.limits.max_object_bytes:
            raise ArchiveError(f"{self.root}: an artifact of {len(data)} bytes is over the "
                               f"per-object cap ({self.limits.max_object_bytes} bytes)")
        with self.writing(), self._lock:
            if os.path.lexists(path):
                try:
                    os.utime(path, follow_symlinks=False)
                except OSError:
                    pass  # another user's object: still there, still named by its hash
                return digest
            total = self.total_bytes()
            if total + len(data) > self.limits.max_total_bytes:
                raise ArchiveError(f"{self.root}: full ({total} of "
                                   f"{self.limits.max_total_bytes} bytes); run `sandboxharness "
                                   "archive gc` or raise the cap")
            self._total = total + len(data)
            self._write_once(path, data)
        return digest

    @contextmanager
    def writing(self, *, exclusive: bool = False) -> Iterator[None]:
        """Writers hold ``ROOT/lock`` shared; ``archive gc`` holds it exclusively, so an
        object a writer has just found (and refreshed) is never deleted under it. Retention
        (``gc --keep-days``) covers the time until the verdict naming it is signed."""
        try:
            fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise ArchiveError(f"{self.root}: cannot lock ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def _write_once(self, path: Path, data: bytes) -> None:
        try:
            fd, tmp = tempfile.mkstemp(dir=self.root / TMP, prefix="obj-")
        except OSError as exc:
            raise ArchiveError(f"{self.root}: cannot write ({exc.strerror})") from None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
                os.fchmod(fh.fileno(), 0o444)
            path.parent.mkdir(exist_ok=True)
            try:
                os.link(tmp, path)  # never replaces: a racing writer's copy is the same bytes
            except FileExistsError:
                pass
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            raise ArchiveError(f"{path}: cannot write ({exc.strerror})") from None
        finally:
            Path(tmp).unlink(missing_ok=True)

    def get(self, digest: str) -> bytes:
        """The object's bytes, re-hashed; missing or changed -> ArchiveIntegrityError."""
        path = self.path_of(digest)
        fd = _open_object(path)
        if fd is None:
            raise ArchiveIntegrityError(f"{digest}: not in the archive {self.root}")
        try:
            size = os.fstat(fd).st_size
            if size > self.limits.max_object_bytes:
                raise ArchiveIntegrityError(f"{digest}: {size} bytes, over the per-object cap")
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(size + 1)
        finally:
            os.close(fd)
        if digest_of(data) != parse_hash(digest):
            raise ArchiveIntegrityError(f"{digest}: changed (its bytes now hash to "
                                        f"{digest_of(data)})")
        return data

    def problem(self, digest: str) -> str | None:
        """Why the object is not intact ('missing', 'changed ...'), None when it is.
        Streams the file: an object of any size costs constant memory."""
        try:
            fd = _open_object(self.path_of(digest))
        except ArchiveIntegrityError as exc:
            return str(exc)
        if fd is None:
            return "missing"
        h = hashlib.sha256()
        try:
            while chunk := os.read(fd, _CHUNK):
                h.update(chunk)
        finally:
            os.close(fd)
        got = "sha256:" + h.hexdigest()
        return None if got == parse_hash(digest) else f"changed (its bytes now hash to {got})"

    def objects(self) -> Iterator[tuple[str | None, Path]]:
        """Every file under ``sha256/``: (its hash by name, path); None for a stray file."""
        base = self.root / OBJECTS
        for sub in sorted(base.iterdir()):
            if not sub.is_dir() or sub.is_symlink() or not re.fullmatch(r"[0-9a-f]{2}", sub.name):
                yield None, sub
                continue
            for f in sorted(sub.iterdir()):
                ok = re.fullmatch(r"[0-9a-f]{62}", f.name) is not None
                yield ("sha256:" + sub.name + f.name if ok else None), f

    def total_bytes(self) -> int:
        if self._total is None:
            self._total = sum(p.lstat().st_size for _, p in self.objects() if p.is_file())
        return self._total

    def remove(self, digest: str) -> int:
        """Delete one object (``archive gc`` only); the bytes freed."""
        path = self.path_of(digest)
        try:
            size = path.lstat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise ArchiveError(f"{path}: cannot delete ({exc.strerror})") from None
        with self._lock:
            if self._total is not None:
                self._total = max(0, self._total - size)
        return size
