"""The campaign proof's table, read from a campaign folder: the hash-chained state (verified on
open, folded with ``loop.view``) and the archived verdicts its rounds name.

One row for the baseline (round 0) and one per finished round: the hypothesis, the signature
it was chosen from (the heaviest regime's bottleneck class and limiter, as the controller saw
it before the round), the candidates tried (launch parameters changed against the round's
best, screening mean, the leader starred), the verdict, the best full-sweep mean after the
round, its speedup over the start, and the reference and FlashInfer means timed in the same
verdicts.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from sandboxharness.archive import Archive, load_verdict
from sandboxharness.generators.tune_sites import find_sites
from sandboxharness.loop.state import CampaignState
from sandboxharness.loop.view import View, fold
from sandboxharness.models import Solution, Stage, Verdict

COLUMNS = ("round", "hypothesis", "signature (bottleneck, limiter)", "candidates tried",
           "verdict", "full-sweep mean", "speedup over start", "reference", "FlashInfer")


def heaviest_signature(view: View) -> dict[str, Any] | None:
    """What ``Controller.choose`` reads: the signature of the heaviest regime that has one."""
    if view.regimes is None:
        return None
    for r in sorted(view.regimes.regimes, key=lambda r: -r.share):
        if sig := view.signatures.get(r.name):
            return sig
    return None


def _sig_text(sig: dict[str, Any] | None, why_none: str) -> str:
    if not sig:
        return f"none ({why_none})"
    extra = [f"{sig['duration_us']:.0f} us"]
    if sig.get("mem_throughput_pct") is not None:
        extra.append(f"mem {sig['mem_throughput_pct']:.0f}%")
    if sig.get("achieved_occupancy_pct") is not None:
        extra.append(f"occ {sig['achieved_occupancy_pct']:.0f}%")
    return f"{sig['bottleneck']}, {sig['limiter']} ({', '.join(extra)})"


def launch_params(sol: Solution) -> dict[str, int]:
    """The tunable literals of a solution (Triton's default where a launch passes none)."""
    out: dict[str, int] = {}
    for src in sol.sources:
        if src.path.endswith(".py"):
            for s in find_sites(src.path, src.content):
                out[s.name] = s.value
    return out


def _changed(before: dict[str, int], after: dict[str, int]) -> str:
    diff = [f"{k} {before.get(k, '?')}->{v}" for k, v in after.items() if before.get(k) != v]
    return ", ".join(diff) or "no launch change"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g} ms"


def _verdicts(archive: Archive, hashes: list[str]) -> list[Verdict]:
    out = []
    for h in dict.fromkeys(hashes):
        try:
            out.append(load_verdict(archive, h))
        except Exception:  # noqa: BLE001, S112  a missing object leaves that cell empty
            continue
    return out


def baselines(verdicts: list[Verdict], uuids: list[str]) -> dict[str, Any]:
    """Mean over the full sweep (per workload: mean over the verdicts) of the reference's and
    FlashInfer's medians timed beside the candidates; why FlashInfer is absent."""
    ref: dict[str, list[float]] = {}
    fi: dict[str, list[float]] = {}
    why_fi = "CPU run: no GPU baselines"
    for v in verdicts:
        bench = v.stage(Stage.BENCHMARK)
        if bench is None:
            continue
        for e in bench.details.get("workloads") or []:
            if isinstance(med := (e.get("reference") or {}).get("median_ms"), int | float):
                ref.setdefault(e.get("workload"), []).append(float(med))
        for e in bench.details.get("regimes") or []:
            if isinstance(med := e.get("flashinfer_median_ms"), int | float):
                fi.setdefault(e.get("workload"), []).append(float(med))
        if (why := (bench.details.get("baselines_unavailable") or {}).get("flashinfer")):
            why_fi = str(why)
        elif "regimes" in bench.details:
            why_fi = "not timed"

    def mean(per: dict[str, list[float]]) -> float | None:
        vals = [statistics.fmean(per[u]) for u in uuids if per.get(u)]
        return statistics.fmean(vals) if vals and len(vals) == len(uuids) else None

    return {"reference_ms": mean(ref), "flashinfer_ms": mean(fi),
            "flashinfer_note": None if fi else why_fi}


def _profile_note(verdicts: list[Verdict]) -> str:
    for v in verdicts:
        st = v.stage(Stage.PROFILE)
        if st is not None and st.status == "skipped":
            return f"profile skipped: {str(st.details.get('reason', ''))[:80]}"
    return "no signature recorded"


def rounds_of(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows, and facts for the text under the table (regimes, noise floor, end)."""
    state = CampaignState.open(folder)
    archive = Archive(folder / "archive")
    entries = state.entries
    final = fold(state)
    every = final.regimes.all_workloads() if final.regimes else []
    start_ms = (final.baseline or {}).get("best_mean_ms")
    rows: list[dict[str, Any]] = []
    if final.baseline is not None:
        vs = _verdicts(archive, list(final.baseline.get("verdicts", [])))
        start = launch_params(state.load_solution(final.config["start_key"]))
        rows.append({"round": 0, "direction": "baseline",
                     "hypothesis": "the start, measured twice over the full sweep",
                     "signature": _sig_text(heaviest_signature(final if not final.rounds else
                                                               _upto(state, "round_started")),
                                            _profile_note(vs)),
                     "candidates": "start: " + ", ".join(f"{k}={v}" for k, v in start.items()),
                     "verdict": "baseline", "best_mean_ms": start_ms, "speedup": 1.0,
                     **baselines(vs, every), "why": "",
                     "wall_s": float(final.baseline.get("wall_s", 0.0)),
                     "device_s": float(final.baseline.get("device_s", 0.0))})
    for i, e in enumerate(entries):
        if e["kind"] != "round":
            continue
        body = e["body"]
        j = max(k for k in range(i) if entries[k]["kind"] == "round_started"
                and entries[k]["body"].get("round") == body["round"])
        before = fold(CampaignState(folder, entries[:j]))
        after = fold(CampaignState(folder, entries[:i + 1]))
        best_params = launch_params(state.load_solution(before.best_key))
        cands = []
        for c in body.get("candidates", []):
            change = _changed(best_params, launch_params(state.load_solution(c["key"])))
            mark = "*" if c["key"] == body.get("leader") else ""
            got = _ms(c.get("screen_mean_ms")) if c.get("correct") else "rejected"
            cands.append(f"{mark}{change} ({got})")
        vs = _verdicts(archive, [*body.get("evidence", []),
                                 *[c["verdict"] for c in body.get("candidates", [])
                                   if c.get("verdict")]])
        rows.append({
            "round": body["round"], "direction": (body.get("direction") or {}).get("id"),
            "hypothesis": body.get("hypothesis"),
            "signature": _sig_text(heaviest_signature(before), _profile_note(vs)),
            "candidates": f"{len(cands)}: " + "; ".join(cands) if cands else
            f"0 ({body.get('repeated', 0)} repeated; {'; '.join(body.get('notes', []))})",
            "verdict": body["verdict"], "best_mean_ms": after.best_mean_ms,
            "speedup": (start_ms / after.best_mean_ms) if start_ms and after.best_mean_ms
            else None, **baselines(vs, every), "why": body.get("why", ""),
            "wall_s": float(body.get("wall_s", 0.0)), "device_s": float(body.get("device_s", 0.0))})
    facts = {"definition": final.config.get("definition"), "policy": final.config.get("policy"),
             "regimes": [f"{r.name}: {len(r.workloads)} workload(s), {r.share:.0%} of the "
                         f"latency{' (explicit)' if r.explicit else ''}"
                         for r in (final.regimes.regimes if final.regimes else [])],
             "noise_floor": final.noise_floor, "device_s": round(final.device_s, 1),
             "wall_s": round(final.wall_s, 1), "ended": final.halted,
             "interrupted_round": (final.open_round or {}).get("round"),
             "rules": final.config.get("rules")}
    return rows, facts


def _upto(state: CampaignState, kind: str) -> View:
    """The view just before the first entry of ``kind`` (the baseline's own signatures)."""
    k = next(i for i, e in enumerate(state.entries) if e["kind"] == kind)
    return fold(CampaignState(state.root, state.entries[:k]))


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(rows: list[dict[str, Any]], facts: dict[str, Any]) -> str:
    lines = [f"# Campaign on {facts.get('definition')} ({facts.get('mode')})", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        ref = r["reference_ms"]
        ref_txt = _ms(ref) + (f" (best's speedup over it {ref / r['best_mean_ms']:.3g}x)"
                              if ref and r["best_mean_ms"] else "")
        fi = _ms(r["flashinfer_ms"]) if r["flashinfer_ms"] is not None else \
            f"not carried ({r['flashinfer_note']})"
        hyp = r["hypothesis"] if r["round"] == 0 else f"{r['direction']}: {r['hypothesis']}"
        cells = [r["round"], hyp, r["signature"], r["candidates"], r["verdict"],
                 _ms(r["best_mean_ms"]),
                 "-" if r["speedup"] is None else f"{r['speedup']:.2f}x", ref_txt, fi]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "Full-sweep mean: the current best's mean latency over every workload after "
              "the round (mean over repeats of the mean over workloads); candidates: launch "
              "parameters changed against the round's best, screening mean (* the leader).", ""]
    for r in rows:
        if r["round"] == 0:
            lines.append(f"- baseline: wall {r['wall_s']:.0f} s, GPU {r['device_s']:.0f} s")
        if r["why"]:
            lines.append(f"- round {r['round']} ({r['verdict']}; wall {r['wall_s']:.0f} s, GPU "
                         f"{r['device_s']:.0f} s): {_cell(r['why'])}")
    lines += ["", f"- regimes: {'; '.join(facts.get('regimes', []))}",
              f"- noise floor {facts.get('noise_floor', 0):.1%}; GPU-seconds "
              f"{facts.get('device_s')}; campaign wall (rounds) {facts.get('wall_s')} s",
              f"- ended: {facts.get('ended')}"]
    if facts.get("interrupted_round") is not None:
        lines.append(f"- round {facts['interrupted_round']} was cut by the time budget "
                     "(no verdict; a resumed campaign runs it again)")
    for key in ("campaign_exit", "campaign_wall_s", "budget_s", "reserve_s", "jobs", "policy",
                "rules", "audit", "total_s"):
        if key in facts:
            lines.append(f"- {key}: {facts[key]}")
    lines += [f"- note: {n}" for n in facts.get("notes", [])]
    return "\n".join(lines) + "\n"
