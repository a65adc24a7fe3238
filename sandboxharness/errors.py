"""One error root for harness failures.

A kernel's failure is *data* (a stage status plus a reason code in the verdict);
everything here is a failure of the harness, its input or its environment.

Every error's ``str()`` is one line of at most :data:`MAX_LINE` characters with no control
characters (a document's value may hold newlines, ANSI escapes or a megabyte of text); the
whole text stays available in :meth:`HarnessError.diagnostics`.
"""

from __future__ import annotations

import signal

MAX_LINE = 500
"""Longest ``str()`` of an error: the head (file, field) and the tail are kept, the middle cut."""
_TAIL = 80


def _escape(text: str) -> str:
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def one_line(text: object, limit: int = MAX_LINE) -> str:
    """``text`` as one printable line of at most ``limit`` characters.

    Newlines, tabs, ANSI escapes and other non-printable characters are written as Python
    escapes (``\\n``, ``\\x1b``), so nothing can add a line or style a terminal; an over-long
    text keeps its head and tail around a marker saying how much was cut (escaping only the
    kept parts: never a megabyte escaped to show 500 characters of it)."""
    raw = str(text)
    if len(raw) <= limit:
        line = _escape(raw)
        if len(line) <= limit:
            return line
    mark = f" ...[{len(raw)} characters, cut]... "
    head = _escape(raw[:limit])[: max(limit - len(mark) - _TAIL, 0)]
    return head + mark + _escape(raw[-_TAIL:])[-_TAIL:]


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""

    #: process exit code the CLI uses for this family
    exit_code: int = 3

    def __init__(self, *args: object) -> None:
        self._full = " ".join(str(a) for a in args)
        super().__init__(*(one_line(a) for a in args[:1]), *args[1:])

    def __str__(self) -> str:
        return one_line(" ".join(str(a) for a in self.args[:1]))

    def diagnostics(self) -> str:
        """The whole text (any length, control characters kept); ``str()`` stays one line."""
        return getattr(self, "_full", "") or super().__str__()


class InputError(HarnessError):
    """Bad user input: a file that is missing, malformed or violates the schema."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class PolicyError(InputError):
    """A policy file that does not validate, or an evaluation the policy forbids outright."""


class InfrastructureError(HarnessError):
    """The environment broke (a tool is missing, a sandbox could not start, a disk filled)."""

    exit_code = 3


class SandboxError(InfrastructureError):
    """The sandbox backend could not run a job (not: the candidate misbehaved inside it)."""


class ToolError(InfrastructureError):
    """An external analyser (bandit, semgrep, compiler driver) failed to run."""


class AuditError(HarnessError):
    """The audit log could not be written or read."""


class VerificationError(AuditError):
    """A signature, proof or log failed verification."""

    exit_code = 1


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP reached the CLI (``cli.signals``). Raised in the main thread,
    it unwinds past every ``except Exception`` but through every ``finally``: sandboxed
    processes killed, job directories and cgroups removed. Not a KeyboardInterrupt, which
    click would turn into a silent exit. The CLI exits ``128 + signal`` (130, 143, 129)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
