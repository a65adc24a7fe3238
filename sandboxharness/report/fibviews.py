"""FlashInfer-Bench's two text views of a dataset's traces, ``report summary`` and ``report
best``, computed from the same trace lines by the same rules (FIB 0.1.2: ``TraceSet.summary``,
``TraceSet.get_best_trace`` with its default 1e-2 error bounds, and the CLI's line formats).

FIB logs these lines at INFO (its ``report`` commands leave the level at WARNING, so as
shipped it prints only the warnings); here they are the command's output, one message a line,
without the logger's time and level prefix. One difference on purpose: text that came from a
trace (solution names, log lines) is printed with control characters escaped, so a trace
cannot move the cursor or restyle the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import one_line
from ..models.trace import Trace

MAX_ABS_ERROR = 1e-2
MAX_REL_ERROR = 1e-2
"""``get_best_trace``'s default bounds, which FIB's ``report best`` uses."""
LOG_LINES = 5
_NO_LIMIT = 1 << 30


def _safe(text: object) -> str:
    return one_line(text, _NO_LIMIT)


@dataclass(frozen=True)
class Line:
    text: str
    warning: bool = False
    """FIB logs this line as a warning (it shows even at FIB's default level)."""


def _by_definition(traces: Sequence[Trace]) -> dict[str, list[Trace]]:
    """Grouped as ``TraceSet.traces``: by definition, in order of first appearance."""
    out: dict[str, list[Trace]] = {}
    for t in traces:
        out.setdefault(t.definition, []).append(t)
    return out


def _passed(traces: Sequence[Trace]) -> list[Trace]:
    return [t for t in traces if t.evaluation is not None and t.evaluation.status == "PASSED"]


def summary(traces: Sequence[Trace]) -> dict[str, Any]:
    """``TraceSet.summary()``: the same keys, order and arithmetic (the same order of
    summation, so the same floats)."""
    every = [t for group in _by_definition(traces).values() for t in group]
    if not every:
        return {"total": 0, "passed": 0, "failed": 0, "min_latency_ms": None,
                "max_latency_ms": None, "avg_latency_ms": None}
    passed = _passed(every)
    lat = [t.evaluation.performance.latency_ms for t in passed
           if t.evaluation is not None and t.evaluation.performance is not None]
    return {"total": len(every), "passed": len(passed), "failed": len(every) - len(passed),
            "min_latency_ms": min(lat) if lat else None,
            "max_latency_ms": max(lat) if lat else None,
            "avg_latency_ms": sum(lat) / len(lat) if lat else None}


def best_trace(traces: Sequence[Trace], definition: str) -> Trace | None:
    """``TraceSet.get_best_trace(definition)``: the passed trace of highest speedup within the
    error bounds; the first of equals."""
    found: Trace | None = None
    best = 0.0
    for t in _passed(_by_definition(traces).get(definition, [])):
        ev = t.evaluation
        if ev is None or ev.correctness is None or ev.performance is None:
            continue
        if ev.correctness.max_absolute_error > MAX_ABS_ERROR or \
                ev.correctness.max_relative_error > MAX_REL_ERROR:
            continue
        if found is None or ev.performance.speedup_factor > best:
            found, best = t, ev.performance.speedup_factor
    return found


def summary_lines(traces: Sequence[Trace]) -> list[Line]:
    return [Line(str(summary(traces)))]


def best_lines(traces: Sequence[Trace], definitions: Sequence[str]) -> list[Line]:
    """The ``report best`` lines for every definition of the dataset, in dataset order."""
    out: list[Line] = []
    for name in definitions:
        t = best_trace(traces, name)
        ev = t.evaluation if t is not None else None
        perf, corr = (ev.performance, ev.correctness) if ev is not None else (None, None)
        if t is None or ev is None or perf is None or corr is None:
            out.append(Line(f"No valid solution found for {_safe(name)}.", warning=True))
            continue
        out += [Line(f"Best solution for {_safe(name)}:"),
                Line(f"- Solution: {_safe(t.solution)}"),
                Line(f"- Speedup:  {perf.speedup_factor:.2f}\u00d7"),
                Line(f"- Errors:   abs={corr.max_absolute_error:.2e}, "
                     f"rel={corr.max_relative_error:.2e}")]
        if ev.log:
            out.append(Line("- Log snippet:"))
            out += [Line(f"  {_safe(line)}") for line in ev.log.splitlines()[:LOG_LINES]]
    return out
