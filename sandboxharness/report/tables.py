"""The export's rows, built from what a dataset holds: stored verdicts first (they carry the
stage durations, reasons and details), trace lines for what no stored verdict covers.

Rows are plain dicts keyed by the columns of ``schema.TABLES``; a value a verdict does not
carry is None (a null in Parquet, an empty cell in CSV), never a made-up zero.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ..audit.records import prepare
from ..errors import HarnessError
from ..models import Stage, Verdict
from ..models.trace import Trace
from .load import ReportInput
from .schema import SIGNATURE_FIELDS, STAGES, TABLES

Row = dict[str, Any]


def when(text: str | None) -> datetime | None:
    """An ISO time as an aware UTC datetime; None for what does not parse."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _axes(axes: Any) -> str:
    return json.dumps(axes, sort_keys=True, separators=(",", ":"))


def _verdict_sha(v: Verdict) -> str | None:
    try:
        return str(prepare(v).summary["verdict_sha256"])
    except HarnessError:
        return None  # a value canonical JSON refuses (never written by this harness)


def environment(v: Verdict) -> Row:
    env = v.environment
    return {"device": env.device, "driver": env.extra.get("driver"), "python": env.python,
            "torch": env.torch, "triton": env.triton, "platform": env.platform,
            "backend": env.backend, "harness_version": env.harness_version,
            "policy_name": v.policy.name, "policy_sha256": v.policy.sha256,
            "candidate_sha256": v.candidate.sha256, "definition_sha256": v.definition.sha256,
            "verdict_sha256": _verdict_sha(v), "run_id": f"seed:{v.seed}", "seed": v.seed,
            "started_at": when(v.started_at), "finished_at": when(v.finished_at)}


def _subject(v: Verdict, op_types: dict[str, str]) -> Row:
    c = v.candidate
    return {"definition": v.definition.name, "op_type": op_types.get(v.definition.name, ""),
            "solution": c.name, "author": c.author, "language": c.language}


def stage_durations(v: Verdict) -> Row:
    got = {s.stage.value: s.duration_s for s in v.stages}
    return {f"{s}_s": got.get(s) for s in STAGES}


def _details(v: Verdict, stage: Stage) -> dict[str, Any]:
    s = v.stage(stage)
    return s.details if s is not None else {}


def _by_workload(entries: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(entries, list):
        return {}
    return {str(e["workload"]): e for e in entries
            if isinstance(e, dict) and "workload" in e}


def _signature(v: Verdict, uuid: str, axes: str) -> dict[str, Any] | None:
    """A profile signature for the workload wherever a stage's details carry one: a
    ``signatures`` map by workload, or a ``signature`` in the workload's entry of
    ``signatures`` (the profile stage's list: one entry per regime), ``regimes`` or
    ``workloads``. The profile stage measures one workload per regime (one set of axis
    values), so a workload with the same axes as a profiled one shares its signature."""
    for st in v.stages:
        sigs = st.details.get("signatures")
        if isinstance(sigs, dict) and isinstance(sigs.get(uuid), dict):
            return dict(sigs[uuid])
        for key in ("signatures", "regimes", "workloads"):
            entry = _by_workload(st.details.get(key)).get(uuid, {})
            if isinstance(entry.get("signature"), dict):
                return dict(entry["signature"])
    prof = _details(v, Stage.PROFILE).get("signatures")
    for entry in prof if isinstance(prof, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("signature"), dict) \
                and isinstance(entry.get("axes"), dict) and _axes(entry["axes"]) == axes:
            return dict(entry["signature"])
    return None


def _errors(case: dict[str, Any] | None) -> tuple[float | None, float | None]:
    if not case:
        return None, None
    outs = [o for t in case.get("trials", []) if isinstance(t, dict)
            for o in (t.get("outputs") or {}).values() if isinstance(o, dict)]
    abs_ = [x for o in outs if (x := _num(o.get("max_abs"))) is not None]
    rel = [x for o in outs if (x := _num(o.get("max_rel"))) is not None]
    return (max(abs_) if abs_ else None), (max(rel) if rel else None)


def _measures(bench: dict[str, Any], regime: dict[str, Any]) -> Row:
    cand = bench.get("candidate") or {}
    ref = bench.get("reference") or {}
    roof = regime.get("roofline") or {}
    latency = _num(cand.get("median_ms"))
    fi = _num(regime.get("flashinfer_median_ms"))
    return {
        "latency_ms": latency, "latency_p25_ms": _num(cand.get("p25_ms")),
        "latency_p75_ms": _num(cand.get("p75_ms")), "latency_mean_ms": _num(cand.get("mean_ms")),
        "latency_min_ms": _num(cand.get("min_ms")), "dispersion": _num(cand.get("dispersion")),
        "timed_calls": _int(cand.get("n")),
        "clock": (bench.get("clock") or {}).get("method") if isinstance(bench.get("clock"), dict)
        else None,
        "reference_ms": _num(ref.get("median_ms")) or _num(regime.get("reference_median_ms")),
        "flashinfer_ms": fi, "speedup": _num(bench.get("speedup")),
        "speedup_vs_flashinfer": _num(regime.get("speedup_vs_flashinfer")),
        "pct_sol": _num(roof.get("pct_of_speed_of_light")),
        "bound": roof.get("bound") if isinstance(roof.get("bound"), str) else None,
        "speed_of_light_ms": _num(roof.get("speed_of_light_ms")),
    }


def _workload_uuids(v: Verdict, cases: dict[str, dict[str, Any]],
                    inp: ReportInput) -> list[tuple[str, str]]:
    """(uuid, axes JSON) of the dataset workloads the verdict covers: those its correctness
    stage ran, or every workload of the definition when it stopped before running any."""
    entry = inp.dataset.definitions.get(v.definition.name)
    known = {w.workload.uuid: _axes(w.workload.axes) for w in entry.workloads} if entry else {}
    ran = [(u, known.get(u, _axes(c.get("axes", {})))) for u, c in cases.items()
           if not c.get("heldout")]
    return ran or list(known.items())


def _latest_traces(traces: Iterable[Trace]) -> dict[tuple[str, str, str], Trace]:
    return {(t.definition, t.solution or "", t.workload.uuid): t for t in traces}


def results_rows(inp: ReportInput) -> list[Row]:
    """One row per solution x workload: the newest stored verdict of each solution, then
    trace lines no stored verdict covers (another tool's traces, or older runs)."""
    op_types = {n: e.definition.op_type for n, e in inp.dataset.definitions.items()}
    traces = _latest_traces(inp.traces)
    newest: dict[tuple[str, str], Verdict] = {}
    for sv in inp.verdicts:
        newest[(sv.verdict.definition.name, sv.verdict.candidate.name)] = sv.verdict
    rows: list[Row] = []
    covered: set[tuple[str, str, str]] = set()
    for (d, s), v in newest.items():
        common = {**_subject(v, op_types), "decision": v.decision,
                  "reasons": ";".join(r.code.value for r in v.reasons),
                  **stage_durations(v), **environment(v)}
        cases = _by_workload(_details(v, Stage.CORRECTNESS).get("cases"))
        bench = _details(v, Stage.BENCHMARK)
        timed, regimes = _by_workload(bench.get("workloads")), _by_workload(bench.get("regimes"))
        for uuid, axes in _workload_uuids(v, cases, inp):
            trace = traces.get((d, s, uuid))
            max_abs, max_rel = _errors(cases.get(uuid))
            row = {**common, "workload": uuid, "axes": axes,
                   "status": trace.evaluation.status if trace and trace.evaluation else None,
                   "max_abs_error": max_abs, "max_rel_error": max_rel,
                   "trace_timestamp": when(trace.evaluation.timestamp)
                   if trace and trace.evaluation else None,
                   **_measures(timed.get(uuid, {}), regimes.get(uuid, {}))}
            if row["clock"] is None and isinstance(bench.get("clock"), str):
                row["clock"] = bench["clock"]  # the CPU clock is said once per stage
            sig = _signature(v, uuid, axes) or {}
            row.update({f"sig_{name}": sig.get(name) for name, _ in SIGNATURE_FIELDS})
            rows.append(row)
            covered.add((d, s, uuid))
    rows.extend(_trace_row(t, inp, op_types) for key, t in traces.items() if key not in covered)
    return rows


def _trace_row(t: Trace, inp: ReportInput, op_types: dict[str, str]) -> Row:
    sol = next((e.solution for e in inp.dataset.solutions if e.solution.name == t.solution),
               None)
    ev = t.evaluation
    perf = ev.performance if ev else None
    corr = ev.correctness if ev else None
    libs = ev.environment.libs if ev else {}
    return {"definition": t.definition, "op_type": op_types.get(t.definition, ""),
            "solution": t.solution, "author": sol.author if sol else None,
            "language": sol.spec.language.value if sol else None, "workload": t.workload.uuid,
            "axes": _axes(t.workload.axes), "status": ev.status if ev else None,
            "latency_ms": perf.latency_ms if perf else None,
            "reference_ms": perf.reference_latency_ms if perf else None,
            "speedup": perf.speedup_factor if perf else None,
            "max_abs_error": corr.max_absolute_error if corr else None,
            "max_rel_error": corr.max_relative_error if corr else None,
            "trace_timestamp": when(ev.timestamp) if ev else None,
            "device": ev.environment.hardware if ev else None, "torch": libs.get("torch"),
            "triton": libs.get("triton") or None, "harness_version": libs.get("sandboxharness"),
            "policy_sha256": libs.get("sandboxharness.policy")}


def verdict_rows(inp: ReportInput) -> list[Row]:
    """One row per stored verdict, in store order."""
    op_types = {n: e.definition.op_type for n, e in inp.dataset.definitions.items()}
    rows = []
    for sv in inp.verdicts:
        v = sv.verdict
        statuses = {s.stage.value: s.status for s in v.stages}
        bench = _details(v, Stage.BENCHMARK)
        rows.append({
            **_subject(v, op_types), "decision": v.decision,
            "reasons": ";".join(r.code.value for r in v.reasons),
            "reason_messages": "\n".join(f"{r.code.value}: {r.message}" for r in v.reasons),
            **{f"{s}_status": statuses.get(s) for s in STAGES}, **stage_durations(v),
            "total_s": sum(s.duration_s for s in v.stages),
            "workloads": len(bench.get("workloads") or []) if bench else None,
            "speedup_geomean": _num(bench.get("speedup_geomean")),
            "isolation": ";".join(v.environment.isolation), "stored_line": sv.line,
            **environment(v)})
    return rows


def round_rows(inp: ReportInput) -> list[Row]:
    if inp.campaign is None:
        return []
    return [{"campaign": inp.campaign.name, "round": r.round, "definition": r.definition,
             "verdict": r.verdict, "best_mean_ms": r.best_mean_ms, "candidates": r.candidates,
             "hypothesis": r.hypothesis, "time": when(r.time)} for r in inp.campaign.rounds]


def all_tables(inp: ReportInput) -> dict[str, list[Row]]:
    """Every table, each row holding every column of its schema (None where absent)."""
    built = {"results": results_rows(inp), "verdicts": verdict_rows(inp),
             "rounds": round_rows(inp)}
    return {name: [{c.name: row.get(c.name) for c in TABLES[name]} for row in rows]
            for name, rows in built.items()}
