"""Per-agent budgets over a sliding hour, and a per-agent rate limit (token bucket).

Budgets are kept in memory and in ``STATE/budgets.json`` (rewritten after every charge), so a
restarted gateway does not hand out a fresh hour.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .tokens import AgentGrant

__all__ = ["Budgets", "RateLimiter"]

HOUR = 3600.0


class Budgets:
    def __init__(self, state_file: Path | None, clock: Callable[[], float] = time.time) -> None:
        self.path, self.clock = state_file, clock
        self._lock = threading.Lock()
        self._spent: dict[str, list[tuple[float, float]]] = {}
        """agent -> (time, evaluation seconds) of each submission in the last hour."""
        if state_file is not None and state_file.is_file():
            try:
                raw = json.loads(state_file.read_text())
                self._spent = {str(k): [(float(t), float(s)) for t, s in v]
                               for k, v in raw.items()}
            except (ValueError, TypeError, AttributeError):
                self._spent = {}  # a damaged file only forgets spending: never grants more

    def _recent(self, agent: str) -> list[tuple[float, float]]:
        cutoff = self.clock() - HOUR
        kept = [e for e in self._spent.get(agent, []) if e[0] > cutoff]
        self._spent[agent] = kept
        return kept

    def refusal(self, grant: AgentGrant) -> str | None:
        """Why a new submission must be refused now, or None."""
        with self._lock:
            recent = self._recent(grant.id)
            if len(recent) >= grant.submissions_per_hour:
                return (f"submission budget spent: {len(recent)} of "
                        f"{grant.submissions_per_hour} in the last hour")
            used = sum(s for _, s in recent)
            if used >= grant.gpu_seconds_per_hour:
                return (f"GPU-time budget spent: {used:.1f} of {grant.gpu_seconds_per_hour:g} "
                        "seconds in the last hour")
        return None

    def charge(self, grant: AgentGrant, seconds: float) -> None:
        with self._lock:
            self._recent(grant.id).append((self.clock(), max(0.0, seconds)))
            self._save()

    def usage(self, grant: AgentGrant) -> dict[str, float]:
        with self._lock:
            recent = self._recent(grant.id)
            return {"submissions_last_hour": len(recent),
                    "gpu_seconds_last_hour": round(sum(s for _, s in recent), 3)}

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self._spent))
        os.replace(tmp, self.path)


class RateLimiter:
    """A token bucket per agent: ``requests_per_minute`` deep, refilled continuously."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, grant: AgentGrant) -> bool:
        rate = grant.requests_per_minute
        now = self.clock()
        with self._lock:
            level, last = self._buckets.get(grant.id, (float(rate), now))
            level = min(float(rate), level + (now - last) * rate / 60.0)
            if level < 1.0:
                self._buckets[grant.id] = (level, now)
                return False
            self._buckets[grant.id] = (level - 1.0, now)
            return True
