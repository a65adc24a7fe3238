"""The regime matrix: a definition's workloads grouped by their variable axes.

Values of each variable axis are split into a few groups at the widest gaps on a log scale
(batch 1-7 vs 512-14509), a regime is one combination of groups, and each regime is weighted by
its share of the total latency measured for the baseline. A regime (or a single workload)
carrying a large share (``explicit_share``, a third by default) is kept explicit, on its own; a
definition with many workloads screens candidates on the heaviest few regimes' representatives
before a full sweep.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from pydantic import Field

from ..models import Definition, WorkloadTrace
from ..models._base import FiniteModel
from ..policy.campaign import RegimeRules

__all__ = ["Regime", "RegimeMatrix", "boundary_workloads", "build_regimes"]


class Regime(FiniteModel):
    name: str
    workloads: list[str]
    """Workload uuids, in file order."""
    axes: dict[str, list[int]]
    """Variable axis -> [lowest, highest] value in the regime."""
    representative: str
    """The workload whose latency is nearest the regime's median (the one to profile)."""
    share: float = Field(ge=0, le=1)
    """Share of the baseline's total latency."""
    baseline_ms: float = Field(ge=0)
    """Mean baseline latency over the regime's workloads."""
    explicit: bool = False
    """Carries at least ``explicit_share`` of the total: kept on its own, always screened."""


class RegimeMatrix(FiniteModel):
    var_axes: list[str]
    regimes: list[Regime]
    screening: list[str]
    """Regime names screened first (every regime unless the definition is large)."""
    total_workloads: int

    def by_name(self) -> dict[str, list[str]]:
        return {r.name: list(r.workloads) for r in self.regimes}

    def all_workloads(self) -> list[str]:
        return [u for r in self.regimes for u in r.workloads]

    def screening_workloads(self) -> list[str]:
        """Representatives of the screened regimes, or every workload on a small definition."""
        if len(self.screening) == len(self.regimes):
            return self.all_workloads()
        chosen = {r.name: r for r in self.regimes}
        return [chosen[n].representative for n in self.screening]

    def is_full(self, uuids: Sequence[str]) -> bool:
        return set(self.all_workloads()) <= set(uuids)


def _groups(values: Sequence[int], bins: int) -> list[list[int]]:
    """Distinct values split into at most ``bins`` runs at the widest log-scale gaps."""
    distinct = sorted(set(values))
    if len(distinct) <= bins:
        return [[v] for v in distinct]
    logs = [math.log2(v + 1) for v in distinct]
    gaps = sorted(range(1, len(distinct)), key=lambda i: logs[i] - logs[i - 1], reverse=True)
    cuts = sorted(gaps[:bins - 1])
    out, start = [], 0
    for cut in [*cuts, len(distinct)]:
        out.append(distinct[start:cut])
        start = cut
    return out


def _label(axes: Mapping[str, list[int]]) -> str:
    if not axes:
        return "all"
    return ",".join(f"{a}={lo}" if lo == hi else f"{a}={lo}..{hi}" for a, (lo, hi) in axes.items())


def _representative(uuids: Sequence[str], latency: Mapping[str, float]) -> str:
    med = statistics.median(latency[u] for u in uuids)
    return min(uuids, key=lambda u: (abs(latency[u] - med), uuids.index(u)))


def build_regimes(definition: Definition, workloads: Sequence[WorkloadTrace],
                  latency_ms: Mapping[str, float] | None, rules: RegimeRules) -> RegimeMatrix:
    """Group ``workloads`` into regimes; ``latency_ms`` (uuid -> baseline latency) weights
    them (equal weights where it is missing)."""
    axes_of = {w.workload.uuid: dict(w.workload.axes) for w in workloads}
    order = list(axes_of)
    var = [a for a in definition.var_axes
           if len({ax.get(a) for ax in axes_of.values()}) > 1]
    group_of: dict[str, dict[int, int]] = {}
    for a in var:
        groups = _groups([ax[a] for ax in axes_of.values() if a in ax], rules.max_bins_per_axis)
        group_of[a] = {v: i for i, g in enumerate(groups) for v in g}
    keyed: dict[tuple[int, ...], list[str]] = {}
    for u in order:
        key = tuple(group_of[a].get(axes_of[u].get(a, -1), -1) for a in var)
        keyed.setdefault(key, []).append(u)
    lat = {u: float((latency_ms or {}).get(u, 1.0)) for u in order}
    total = sum(lat.values()) or 1.0
    members: list[list[str]] = []
    for uuids in (keyed[k] for k in sorted(keyed)):
        # a single workload that carries a large share leaves its group as an explicit regime
        heavy = [u for u in uuids if len(uuids) > 1 and lat[u] / total >= rules.explicit_share]
        if len(heavy) == len(uuids) or not var:  # nothing lighter to set them apart from
            heavy = []
        rest = [u for u in uuids if u not in heavy]
        members += [[u] for u in heavy] + ([rest] if rest else [])
    regimes = []
    for uuids in members:
        span = {a: [min(axes_of[u][a] for u in uuids), max(axes_of[u][a] for u in uuids)]
                for a in var}
        share = sum(lat[u] for u in uuids) / total
        regimes.append(Regime(
            name=_label(span), workloads=uuids, axes=span,
            representative=_representative(uuids, lat), share=min(share, 1.0),
            baseline_ms=statistics.fmean(lat[u] for u in uuids),
            explicit=share >= rules.explicit_share))
    regimes = _unique_names(regimes)
    ranked = sorted(regimes, key=lambda r: (not r.explicit, -r.share))
    screening = ([r.name for r in ranked[:max(rules.screening_regimes,
                                              sum(r.explicit for r in regimes))]]
                 if len(order) > rules.large_definition else [r.name for r in regimes])
    return RegimeMatrix(var_axes=var, regimes=regimes, screening=screening,
                        total_workloads=len(order))


def _unique_names(regimes: list[Regime]) -> list[Regime]:
    seen: dict[str, int] = {}
    out = []
    for r in regimes:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        out.append(r if n == 0 else r.model_copy(update={"name": f"{r.name}#{n + 1}"}))
    return out


def boundary_workloads(matrix: RegimeMatrix, workloads: Sequence[WorkloadTrace]) -> list[str]:
    """The workloads at the lowest and highest value of each variable axis."""
    chosen: list[str] = []
    for a in matrix.var_axes:
        have = [w for w in workloads if a in w.workload.axes]
        if not have:
            continue
        for pick in (min, max):
            u = pick(have, key=lambda w: w.workload.axes[a]).workload.uuid
            if u not in chosen:
                chosen.append(u)
    if not chosen and workloads:
        chosen.append(workloads[0].workload.uuid)
    return chosen
