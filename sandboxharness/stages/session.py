"""Host side of the worker protocol's transport: frames with deadlines, typed faults, nothing
trusted. The typed ops are ``stages.client.WorkerClient``'s."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..models.verdict import ReasonCode
from ..sandbox.interface import ExitInfo, JobPaths, SandboxedProcess
from ..worker import protocol


class KernelFault(Exception):
    """The candidate (or reference) misbehaved; turned into a Reason at the stage boundary."""

    def __init__(self, code: ReasonCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class WorkerSession:
    def __init__(self, proc: SandboxedProcess, deadline_s: float) -> None:
        self.proc = proc
        self.deadline = time.monotonic() + deadline_s
        self.exit: ExitInfo | None = None
        self._buf = b""

    @property
    def paths(self) -> JobPaths:
        """The job's directories as the worker sees them."""
        return self.proc.paths

    def _read_exact(self, n: int, until: float) -> bytes:
        while len(self._buf) < n:
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError
            chunk = self.proc.recv(max(n - len(self._buf), 65536), left)
            if not chunk:
                raise EOFError
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _dead(self, what: str) -> KernelFault:
        info = self.close()
        tail = info.stderr.strip().splitlines()[-3:]
        detail = f" (last log lines: {' | '.join(tail)})" if tail else ""
        if info.timed_out:
            return KernelFault(ReasonCode.TIMEOUT, f"killed at the wall-clock limit during {what}")
        if info.limit_hit:
            return KernelFault(ReasonCode.RESOURCE_LIMIT,
                               f"killed by the {info.limit_hit} limit during {what}")
        if info.returncode == -31:  # SIGSYS: the seccomp filter killed it on a forbidden call
            return KernelFault(ReasonCode.WORKER_PROTOCOL,
                               f"worker killed by the seccomp filter (SIGSYS: a forbidden system "
                               f"call) during {what}{detail}")
        if info.returncode is not None and info.returncode < 0:
            return KernelFault(ReasonCode.WORKER_PROTOCOL,
                               f"worker killed by signal {-info.returncode} during {what}{detail}")
        return KernelFault(ReasonCode.WORKER_PROTOCOL,
                           f"worker exited early (status {info.returncode}) during {what}{detail}")

    def _frame(self, until: float) -> dict[str, Any]:
        size = protocol.parse_header(self._read_exact(protocol.HEADER, until))
        return protocol.decode(self._read_exact(size, until))

    def request(self, msg: Mapping[str, Any], timeout_s: float,
                fail_code: ReasonCode = ReasonCode.RUNTIME_ERROR,
                on_progress: Callable[[dict[str, Any], float], None] | None = None,
                max_progress: int = 0) -> dict[str, Any]:
        """One request/reply. Raises KernelFault; a candidate error reply raises with fail_code.

        Frames marked ``progress`` before the reply (at most ``max_progress``) go to
        ``on_progress`` with the host's clock at their arrival: results bound call by call."""
        what = str(msg.get("op"))
        until = min(self.deadline, time.monotonic() + timeout_s)
        try:
            self.proc.send(protocol.encode(msg))
            reply = self._frame(until)
            seen = 0
            while reply.get("progress") is True:
                seen += 1
                if on_progress is None or seen > max_progress:
                    raise protocol.ProtocolError(f"unexpected progress frame #{seen}")
                on_progress(reply, time.monotonic())
                reply = self._frame(until)
        except TimeoutError:  # before OSError: it is a subclass
            self.close()
            code = ReasonCode.COMPILE_TIMEOUT if fail_code == ReasonCode.COMPILE_ERROR else (
                ReasonCode.TIMEOUT)
            raise KernelFault(code, f"no answer within {timeout_s:.0f} s during {what}; "
                                    "worker killed") from None
        except (BrokenPipeError, EOFError, OSError):
            raise self._dead(what) from None
        except protocol.ProtocolError as exc:
            self.close()
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"{what}: {exc}") from None
        violations = reply.get("integrity") or []
        if violations:
            self.close()
            raise KernelFault(ReasonCode.INTEGRITY_VIOLATION,
                              f"tampered with at run time: {', '.join(map(str, violations))}")
        if reply.get("ok") is not True:
            raise KernelFault(fail_code, str(reply.get("error", "worker reported failure")))
        return reply

    def close(self) -> ExitInfo:
        if self.exit is None:
            try:
                self.proc.send(protocol.encode(protocol.Bye().to_wire()))
            except OSError:
                pass
            self.exit = self.proc.wait(1.0) or self.proc.kill()
        return self.exit
