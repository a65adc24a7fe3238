"""``mcp``: candidates from agents connected to the MCP gateway (``sandboxharness mcp serve``).

Each round opens a *round* in the gateway's state folder (``rounds/<id>/task.json``: the task
bundle and its markdown). While it is open, ``get_task`` for that definition hands agents this
bundle as written (same hash), and every ``submit_candidate`` for the definition is evaluated
by the gateway (the agent's feedback) and also delivered to the round. The generator waits,
bounded, until ``k`` solutions arrived or the wait ends, closes the round and returns what
came: untrusted documents, read through the same intake as any other, that the campaign
evaluates again under its own rules.

The gateway's state folder is ``$SANDBOXHARNESS_GATEWAY_STATE``, else ``<campaign
state>/gateway`` (serve with ``--state`` pointing there); the wait is
``$SANDBOXHARNESS_MCP_WAIT_S`` seconds (default 1800).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..intake import load_solution
from ..models import Solution
from .interface import MAX_K, GeneratorError

if TYPE_CHECKING:
    from ..loop.bundle import TaskBundle

__all__ = ["GATEWAY_STATE_ENV", "MCPGenerator", "WAIT_ENV", "make_generator"]

GATEWAY_STATE_ENV = "SANDBOXHARNESS_GATEWAY_STATE"
WAIT_ENV = "SANDBOXHARNESS_MCP_WAIT_S"
MAX_SUBMISSION_BYTES = 4 * 1024 * 1024


class MCPGenerator:
    name = "mcp"

    def __init__(self, gateway_state: Path, *, wait_s: float = 1800.0, poll_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < wait_s <= 7 * 86400:
            raise InputError(f"the mcp generator's wait must be 0 < s <= 1 week, not {wait_s}")
        self.state, self.wait_s, self.poll_s, self.clock = gateway_state, wait_s, poll_s, clock
        self.notes: list[str] = []
        """What was skipped in the last round, and why."""

    def propose(self, task: TaskBundle, k: int) -> list[Solution]:
        from ..gateway.store import GatewayStore
        from ..loop.bundle import render_markdown

        k = max(1, min(k, MAX_K))
        self.notes = []
        store = GatewayStore(self.state)
        folder = store.open_round(task.model_dump(mode="json"), render_markdown(task))
        inbox = folder / "submissions"
        deadline = self.clock() + self.wait_s
        seen: dict[str, Solution | None] = {}
        try:  # only usable solutions count towards k: a broken file does not end the wait
            while len(self._read(inbox, task, seen)) < k and self.clock() < deadline:
                time.sleep(self.poll_s)
        finally:
            store.close_round(folder)
        out = self._read(inbox, task, seen)
        for extra in out[k:]:
            self.notes.append(f"{extra.name}: beyond the round's {k} candidates")
        if not out:
            raise GeneratorError(f"no agent submitted a usable solution for "
                                 f"{task.definition.get('name')!r} within {self.wait_s:g} s "
                                 f"(gateway state {self.state})")
        return out[:k]

    def _read(self, inbox: Path, task: TaskBundle, seen: dict[str, Solution | None]
              ) -> list[Solution]:
        """Usable solutions in arrival order; each file is judged once (``seen``)."""
        want = task.definition.get("name")
        for path in sorted(inbox.glob("v_*.json"), key=lambda p: p.stat().st_mtime):
            if path.name not in seen:
                seen[path.name] = self._judge(path, want)
        return [s for s in seen.values() if s is not None]

    def _judge(self, path: Path, want: object) -> Solution | None:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_SUBMISSION_BYTES:
            self.notes.append(f"{path.name}: not a regular file within the size cap")
            return None
        try:
            sol = load_solution(path)
        except InputError as e:
            self.notes.append(f"{path.name}: {e}")
            return None
        if sol.definition != want:
            self.notes.append(f"{path.name}: for {sol.definition!r}, not {want!r}")
            return None
        return sol


def make_generator(campaign_state: Path) -> MCPGenerator:
    """The generator ``campaign run --generator mcp`` uses (see the module's docstring)."""
    state = Path(os.environ.get(GATEWAY_STATE_ENV) or campaign_state / "gateway")
    try:
        wait = float(os.environ.get(WAIT_ENV, "1800"))
    except ValueError:
        raise InputError(f"${WAIT_ENV} is not a number of seconds") from None
    return MCPGenerator(state, wait_s=wait)
