"""Worker processes for the verifier's per-record and per-checkpoint checks, so they run
on other cores while the main process hashes the log.

Plain subprocesses (``python -m sandboxharness.audit.pool``) speaking length-prefixed
pickles over their pipes: both ends are this code, nothing else writes to the pipes,
and no ``multiprocessing`` start method re-imports the caller's ``__main__``. Each
worker has at most one job outstanding; results come back in submission order. With
``workers=0`` every job runs inline.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..errors import InfrastructureError

_LEN = struct.Struct("<Q")


def _jobs() -> dict[str, Callable[..., Any]]:
    from .content import check_records, check_region
    from .cpscan import check_entries

    return {"records": check_records, "region": check_region, "checkpoints": check_entries}


def _read(stream: IO[bytes]) -> Any:
    head = stream.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    size = _LEN.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - our own worker's pipe, see the module doc


def _write(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LEN.pack(len(data)) + data)
    stream.flush()


class Pool:
    def __init__(self, workers: int, pass_fds: tuple[int, ...] = ()) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.outstanding: list[int | None] = []
        self.results: dict[int, Any] = {}
        self.next = 0
        self.jobs = _jobs() if workers == 0 else {}
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            for _ in range(workers):
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "sandboxharness.audit.pool"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, env=env, close_fds=True, pass_fds=pass_fds))
                self.outstanding.append(None)
        except OSError as exc:
            self.close()
            raise InfrastructureError(f"cannot start verification workers: {exc}") from None

    def submit(self, kind: str, *args: Any) -> int:
        ticket, self.next = self.next, self.next + 1
        if not self.procs:
            self.results[ticket] = self.jobs[kind](*args)
            return ticket
        w = ticket % len(self.procs)
        self._collect(w)
        stdin = self.procs[w].stdin
        try:
            if stdin is None:
                raise OSError("no pipe")
            _write(stdin, (kind, args))
        except OSError as exc:
            raise InfrastructureError(f"verification worker died: {exc}") from None
        self.outstanding[w] = ticket
        return ticket

    def _collect(self, w: int) -> None:
        ticket = self.outstanding[w]
        if ticket is None:
            return
        stdout = self.procs[w].stdout
        try:
            if stdout is None:
                raise EOFError
            ok, value = _read(stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            raise InfrastructureError("a verification worker died") from None
        if not ok:
            raise InfrastructureError(f"a verification worker failed: {value}")
        self.results[ticket] = value
        self.outstanding[w] = None

    def result(self, ticket: int) -> Any:
        if ticket not in self.results:
            self._collect(ticket % len(self.procs))
        return self.results.pop(ticket)

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve() -> None:
    jobs = _jobs()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            kind, args = _read(stdin)
        except EOFError:
            return
        try:
            result: tuple[bool, Any] = (True, jobs[kind](*args))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises
            result = (False, f"{exc.__class__.__name__}: {exc}")
        _write(stdout, result)


if __name__ == "__main__":
    _serve()
