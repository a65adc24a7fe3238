"""What the report shows, computed from the export's rows: candidates per definition, the
leaderboard (best solution per author), and the rejection reasons across the dataset."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .schema import STAGES
from .tables import Row


@dataclass
class CandidateView:
    definition: str
    solution: str
    author: str
    language: str
    decision: str | None
    reasons: list[str]
    messages: str = ""
    stage_s: dict[str, float | None] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    """Result rows, one per workload, in dataset order."""

    @property
    def passed(self) -> int:
        return sum(1 for r in self.rows if r.get("status") == "PASSED")

    @property
    def geomean(self) -> float | None:
        s = [v for r in self.rows if isinstance(v := r.get("speedup"), float) and v > 0]
        return math.exp(sum(math.log(v) for v in s) / len(s)) if s else None

    @property
    def rank(self) -> tuple[bool, int, float]:
        """Promoted first, then more workloads passed, then the higher speedup."""
        return (self.decision == "promote", self.passed, self.geomean or 0.0)

    @property
    def outcome(self) -> str:
        if self.decision:
            return self.decision
        return "passed" if self.rows and self.passed == len(self.rows) else "failed"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def candidates(tables: dict[str, list[Row]]) -> dict[str, list[CandidateView]]:
    """Every candidate by definition (definitions sorted, candidates in row order)."""
    newest = {(r["definition"], r["solution"]): r for r in tables.get("verdicts", [])}
    out: dict[tuple[str, str], CandidateView] = {}
    for row in tables.get("results", []):
        key = (_text(row.get("definition")), _text(row.get("solution")))
        view = out.get(key)
        if view is None:
            v = newest.get(key, {})
            reasons = [c for c in _text(row.get("reasons")).split(";") if c]
            view = out[key] = CandidateView(
                definition=key[0], solution=key[1], author=_text(row.get("author")),
                language=_text(row.get("language")), decision=row.get("decision"),
                reasons=reasons, messages=_text(v.get("reason_messages")),
                stage_s={s: v.get(f"{s}_s") for s in STAGES} if v else {})
        view.rows.append(row)
    grouped: dict[str, list[CandidateView]] = {}
    for view in out.values():
        grouped.setdefault(view.definition, []).append(view)
    return {k: grouped[k] for k in sorted(grouped)}


def leaderboard(views: list[CandidateView]) -> list[CandidateView]:
    """The best solution of each author, best first."""
    best: dict[str, CandidateView] = {}
    for v in views:
        if v.author not in best or v.rank > best[v.author].rank:
            best[v.author] = v
    return sorted(best.values(), key=lambda v: v.rank, reverse=True)


def workloads(views: list[CandidateView]) -> list[tuple[str, str]]:
    """(uuid, axes) of the definition's workloads, in order of first appearance."""
    seen: dict[str, str] = {}
    for v in views:
        for r in v.rows:
            seen.setdefault(_text(r.get("workload")), _text(r.get("axes")))
    return list(seen.items())


def per_workload(view: CandidateView, column: str, order: list[tuple[str, str]]
                 ) -> list[float | None]:
    by = {r.get("workload"): r.get(column) for r in view.rows}
    return [v if isinstance(v := by.get(u), float) else None for u, _ in order]


def rejection_counts(all_views: dict[str, list[CandidateView]]) -> Counter[str]:
    """Candidates carrying each reason code (a trace-only candidate: its failing statuses)."""
    counts: Counter[str] = Counter()
    for views in all_views.values():
        for v in views:
            if v.decision is not None:
                counts.update(set(v.reasons))
            else:
                counts.update({_text(r.get("status")) for r in v.rows
                               if r.get("status") not in (None, "PASSED")})
    return counts
