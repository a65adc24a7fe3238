"""The generator layer's one interface: a source of candidate solutions for a round.

A generator gets the round's task bundle (what the agent is told) and a bound ``k``; it returns
at most ``k`` FlashInfer-Bench ``Solution`` documents. Whatever it returns is untrusted: the
campaign controller validates, deduplicates and evaluates every candidate itself, and nothing a
generator says about speed or correctness is read (the harness measures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import HarnessError

if TYPE_CHECKING:
    from ..loop.bundle import TaskBundle
    from ..models import Solution

MAX_K = 64
"""Most candidates one round may ask for (the controller's bound on any generator)."""


class GeneratorError(HarnessError):
    """A generator could not produce candidates (its tool failed, timed out, or wrote nothing
    usable). A harness failure, not a candidate's: the round records it and ends in reject."""

    exit_code = 3


@runtime_checkable
class Generator(Protocol):
    """Proposes candidates for one round."""

    name: str
    """Registry name (``triton-params``, ``command``, ``mcp``)."""

    def propose(self, task: TaskBundle, k: int) -> list[Solution]:
        """At most ``k`` candidate solutions for ``task``; GeneratorError when none can be made."""
        ...
