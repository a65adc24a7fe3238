"""One error root for harness failures.

A kernel's failure is *data* (a stage status plus a reason code in the verdict);
everything here is a failure of the harness, its input or its environment.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""

    #: process exit code the CLI uses for this family
    exit_code: int = 3

    def diagnostics(self) -> str:
        """A longer, multi-line explanation for humans (``str()`` stays one line)."""
        return str(self)


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
