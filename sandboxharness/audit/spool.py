"""Group commit across processes: a writer that finds the log locked leaves its batch in
``LOG.spool/`` and waits for the lock; whoever holds it writes every waiting batch with
its own (one fsync each for records and checkpoint) and answers each one.

Nothing here is trusted on sight. A request counts only while its writer still waits
(it holds a shared ``flock`` on the request file: a copy or a leftover has none), and
only with an HMAC under a key derived from the signing key, so the signer never writes
records that a holder of its key did not ask for; answers carry the same HMAC, so a
planted answer cannot fake an acknowledgement. A lost request or answer costs nothing:
the waiting writer then appends its batch itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from dataclasses import dataclass
from typing import Any

from ..errors import AuditError
from . import storage
from .interface import AppendResult
from .keys import Signer
from .records import Prepared

SUFFIX = ".spool"
_LABEL = "audit-spool-v1"
_STALE_S = 600


@dataclass
class Ticket:
    name: str
    fd: int
    """Holds the shared lock that says: still waiting."""
    nonce: str


@dataclass
class Request:
    name: str
    nonce: str
    groups: list[list[Prepared]]


def _mac(signer: Signer, *parts: bytes) -> str:
    key = signer.derive_key(_LABEL)
    return hmac.new(key, b"\n".join(parts), hashlib.sha256).hexdigest()


class Spool:
    def __init__(self, d: storage.LogDir, log_name: str) -> None:
        self.d, self.name = d, log_name + SUFFIX
        self.where = d.where(self.name)

    def _dir(self, create: bool) -> int | None:
        if create:
            try:
                os.mkdir(self.name, 0o700, dir_fd=self.d.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise storage.oserror(self.where, "cannot create the spool directory", exc) \
                    from None
        try:
            fd = os.open(self.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=self.d.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise storage.oserror(self.where, "cannot open the spool directory", exc) from None
        return fd

    def submit(self, groups: list[list[Prepared]], signer: Signer) -> Ticket:
        nonce = secrets.token_hex(16)
        body = json.dumps({"v": 1, "key": signer.key_id, "nonce": nonce, "groups": [
            [[p.verdict_bytes.decode(), p.summary] for p in g] for g in groups]}).encode()
        data = _mac(signer, b"request", body).encode() + b"\n" + body
        sfd = self._dir(create=True)
        if sfd is None:
            raise AuditError(f"{self.where}: the spool directory vanished")
        name, tmp = f"{os.getpid()}-{nonce}.req", f".{os.getpid()}-{nonce}.tmp"
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=sfd)
            fcntl.flock(fd, fcntl.LOCK_SH)  # before it is visible: never seen unclaimed
            storage.write_raw(fd, data)
            os.rename(tmp, name, src_dir_fd=sfd, dst_dir_fd=sfd)
        except OSError as exc:
            raise storage.oserror(self.where / name, "cannot queue the batch", exc) from None
        finally:
            os.close(sfd)
        return Ticket(name, fd, nonce)

    def take(self, ticket: Ticket, signer: Signer, count: int) -> list[AppendResult] | None:
        """The answer to ``ticket`` if a leader wrote its batch (the ticket is then closed);
        None while there is none (the ticket stays queued)."""
        sfd = self._dir(create=False)
        if sfd is None:
            return None
        try:
            data = _read(sfd, ticket.name[:-4] + ".done")
            if data is None:
                return None
            _unlink(sfd, ticket.name)
            _unlink(sfd, ticket.name[:-4] + ".done")
        finally:
            os.close(sfd)
        os.close(ticket.fd)
        ticket.fd = -1
        if b"\n" not in data:
            return None
        mac, body = data.split(b"\n", 1)
        if not hmac.compare_digest(mac.decode(errors="replace"),
                                   _mac(signer, b"answer", ticket.nonce.encode(), body)):
            return None  # not from a holder of our key: write the batch ourselves
        results = [AppendResult(**{**r, "indices": tuple(r["indices"])})
                   for r in json.loads(body)]
        return results if len(results) == count else None

    def withdraw(self, ticket: Ticket) -> None:
        if ticket.fd < 0:
            return
        sfd = self._dir(create=False)
        if sfd is not None:
            _unlink(sfd, ticket.name)
            os.close(sfd)
        os.close(ticket.fd)
        ticket.fd = -1

    def collect(self, signer: Signer, room: int) -> list[Request]:
        """Live, authentic requests by holders of ``signer``'s key, up to ``room`` records."""
        sfd = self._dir(create=False)
        if sfd is None:
            return []
        out: list[Request] = []
        try:
            for name in sorted(os.listdir(sfd)):
                req = self._one(sfd, name, signer)
                if req is not None and sum(map(len, req.groups)) <= room:
                    room -= sum(map(len, req.groups))
                    out.append(req)
        except OSError:
            return out  # an unreadable spool only costs the batching
        finally:
            os.close(sfd)
        return out

    def _one(self, sfd: int, name: str, signer: Signer) -> Request | None:
        if name.startswith(".") or not name.endswith(".req"):
            _sweep(sfd, name)
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                data = _read_fd(fd)  # someone waits for it
            else:
                _unlink(sfd, name)  # nobody waits: a dead writer's leftover or a copy
                return None
        finally:
            os.close(fd)
        return _parse(name, data, signer)

    def answer(self, request: Request, results: list[AppendResult], signer: Signer) -> None:
        body = json.dumps([{**r.__dict__, "indices": list(r.indices)} for r in results]).encode()
        data = _mac(signer, b"answer", request.nonce.encode(), body).encode() + b"\n" + body
        sfd = self._dir(create=False)
        if sfd is None:
            return
        try:
            done, tmp = request.name[:-4] + ".done", f".{request.name[:-4]}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=sfd)
            try:
                storage.write_raw(fd, data)
            finally:
                os.close(fd)
            os.rename(tmp, done, src_dir_fd=sfd, dst_dir_fd=sfd)
            _unlink(sfd, request.name)
        except OSError:
            pass  # the writer then appends its batch itself: a duplicate, never a loss
        finally:
            os.close(sfd)


def _parse(name: str, data: bytes | None, signer: Signer) -> Request | None:
    if not data or b"\n" not in data:
        return None
    mac, body = data.split(b"\n", 1)
    if not hmac.compare_digest(mac.decode(errors="replace"), _mac(signer, b"request", body)):
        return None  # another key's writer (it appends its own), or not a writer at all
    try:
        obj: Any = json.loads(body)
        groups = [[Prepared(v.encode(), dict(s)) for v, s in g] for g in obj["groups"]]
        if obj["key"] != signer.key_id or not all(groups):
            return None
        return Request(name, str(obj["nonce"]), groups)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _read(sfd: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _unlink(sfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=sfd)
    except OSError:
        pass


def _sweep(sfd: int, name: str) -> None:
    """Answers nobody collected (their writer died) and stray temporary files."""
    try:
        st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
    except OSError:
        return
    if time.time() - st.st_mtime > _STALE_S:
        _unlink(sfd, name)


def check_spool_dir(d: storage.LogDir, log_name: str) -> None:
    """Refuse a symlink where the spool directory belongs."""
    try:
        st = os.stat(log_name + SUFFIX, dir_fd=d.fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise AuditError(f"{d.where(log_name + SUFFIX)}: not a directory (a symlink or file "
                         "where the spool directory belongs)")
