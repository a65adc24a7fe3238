"""Measuring solutions for a campaign: the dataset engine on a private copy of the dataset.

Every sweep writes a fresh FlashInfer-Bench dataset under the campaign's ``work/`` folder (the
definition, the chosen workloads and their blobs, the solutions under names the harness gives
them) and runs :func:`sandboxharness.dataset.run_dataset` on it: every stage, every sandbox, the
same traces and verdict store as ``run --local``. The user's dataset is never written to. What
comes back is turned into :class:`~sandboxharness.policy.campaign.Sweep` evidence from the
verdicts alone.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dataset import RunOptions, run_dataset
from ..errors import InfrastructureError, InputError
from ..models import Definition, Policy, ReasonCode, Solution, Stage, Verdict, WorkloadTrace
from ..models.workload import SafetensorsInput
from ..policy.campaign import Sweep
from .regimes import RegimeMatrix
from .state import candidate_key

__all__ = ["Measured", "SweepSetup", "per_regime", "run_sweep", "signatures_of", "sweep_of",
           "sweep_policy"]

SPEED_ONLY = frozenset({ReasonCode.SLOWER_THAN_BASELINE, ReasonCode.TIMING_UNSTABLE})
"""Reasons that say nothing about correctness: a candidate rejected only for these is correct."""


def sweep_of(verdict: Verdict) -> Sweep:
    """The evidence in one verdict: correctness, the median latency per workload, and the
    setting it was measured in."""
    corr = verdict.stage(Stage.CORRECTNESS)
    bench = verdict.stage(Stage.BENCHMARK)
    san = verdict.stage(Stage.SANITIZER)
    correct = (corr is not None and corr.status == "passed" and bench is not None
               and bench.status != "skipped"
               and all(r.code in SPEED_ONLY for r in verdict.reasons))
    latency: dict[str, float] = {}
    entries = (bench.details.get("workloads") or []) if bench is not None else []
    for entry in entries:
        uuid, med = entry.get("workload"), (entry.get("candidate") or {}).get("median_ms")
        if isinstance(uuid, str) and isinstance(med, int | float) and uuid not in latency:
            latency[uuid] = float(med)
    trials = corr.details.get("trials_per_case", 0) if corr is not None else 0
    return Sweep(verdict_sha256=verdict.content_hash(), correct=correct, latency_ms=latency,
                 device=verdict.environment.device, backend=verdict.environment.backend,
                 sanitizer_passed=san is not None and san.status == "passed",
                 clock_recorded=bool(entries) and all(e.get("gpu_state") for e in entries),
                 trials=int(trials) if isinstance(trials, int) else 0)


def device_seconds(verdict: Verdict) -> float:
    """Time a verdict held a GPU (0 on the CPU)."""
    if verdict.environment.device == "cpu":
        return 0.0
    return sum(s.duration_s for s in verdict.stages
               if s.stage in (Stage.COMPILE, Stage.CORRECTNESS, Stage.SANITIZER, Stage.BENCHMARK))


@dataclass
class SweepSetup:
    work: Path
    definition: Definition
    workloads: Sequence[WorkloadTrace]
    source_root: Path
    policy: Policy
    backend: str | None = None
    jobs: int = 1
    hidden: Sequence[Path] = ()
    record: Callable[[Verdict], None] | None = None
    """Every verdict, as it is measured (the audit log)."""
    archive: Path | None = None
    """Content-addressed archive of every evaluation's artifacts (``sandboxharness.archive``)."""


@dataclass
class Measured:
    """What one sweep measured, by candidate key."""

    sweeps: dict[str, Sweep] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    """Candidate key -> verdict sha256."""
    errors: dict[str, str] = field(default_factory=dict)
    """Candidate key -> the harness error that stopped its evaluation."""
    device_s: float = 0.0
    signatures: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Candidate key -> workload uuid -> profile signature (GPU runs with a profile stage)."""


def signatures_of(verdict: Verdict) -> dict[str, dict[str, Any]]:
    """Profile signatures a verdict carries, by workload uuid: a stage's ``details`` holding
    ``signatures`` as {uuid: signature} or [{workload, signature}], or one ``signature``
    (keyed ``*``). Anything that does not validate as a Signature is ignored."""
    from pydantic import ValidationError

    from ..profile.signature import Signature

    found: dict[str, dict[str, Any]] = {}
    for st in verdict.stages:
        raw = st.details.get("signatures")
        pairs: list[tuple[str, Any]] = []
        if isinstance(raw, dict):
            pairs = [(str(k), v) for k, v in raw.items()]
        elif isinstance(raw, list):
            pairs = [(str(x.get("workload")), x.get("signature")) for x in raw
                     if isinstance(x, dict)]
        elif isinstance(st.details.get("signature"), dict):
            pairs = [("*", st.details["signature"])]
        for uuid, sig in pairs:
            try:
                found[uuid] = Signature.model_validate(sig).model_dump(mode="json")
            except ValidationError:
                continue
    return found


def per_regime(matrix: RegimeMatrix, by_workload: Mapping[str, dict[str, Any]]
               ) -> dict[str, dict[str, Any] | None]:
    """Each regime's signature: its representative's, else any of its workloads', else a
    call-wide one (``*``)."""
    out: dict[str, dict[str, Any] | None] = {}
    for r in matrix.regimes:
        out[r.name] = by_workload.get(r.representative) or next(
            (by_workload[u] for u in r.workloads if u in by_workload), None) or by_workload.get("*")
    return out


def _private_name(key: str) -> str:
    return "c" + key.removeprefix("sha256:")[:24]


def _copy_blobs(setup: SweepSetup, chosen: Sequence[WorkloadTrace], dest: Path) -> None:
    for wl in chosen:
        for spec in wl.workload.inputs.values():
            if not isinstance(spec, SafetensorsInput):
                continue
            src, dst = setup.source_root / spec.path, dest / spec.path
            if dst.exists():
                continue
            if not src.resolve().is_relative_to(setup.source_root.resolve()):
                raise InputError("blob path leaves the dataset", where=str(src))
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)


def sweep_policy(policy: Policy, *, trials: int | None = None, profile: bool = True) -> Policy:
    """The policy one sweep runs under: ``trials`` raises the correctness trials (the boundary
    replay); ``profile`` False turns the profile stage off for a sweep whose signatures the
    controller never reads (screening, the boundary replay): Nsight Compute costs seconds of
    exclusive GPU time per candidate, and a profile is evidence, never a gate."""
    if trials is not None:
        policy = policy.model_copy(update={
            "correctness": policy.correctness.model_copy(update={"trials": trials})})
    if not profile and policy.profile.enabled:
        policy = policy.model_copy(update={
            "profile": policy.profile.model_copy(update={"enabled": False})})
    return policy


def run_sweep(setup: SweepSetup, solutions: Sequence[Solution], uuids: Sequence[str], *,
              seed: int, tag: str, trials: int | None = None, profile: bool = True) -> Measured:
    """Evaluate ``solutions`` on the workloads ``uuids`` in a private dataset ``work/<tag>``,
    under :func:`sweep_policy` (``trials``, ``profile``)."""
    d = setup.definition
    root = setup.work / tag
    if root.exists():  # a round interrupted and now re-run: its old sweep is discarded
        shutil.rmtree(root)
    op = root / "definitions" / d.op_type
    op.mkdir(parents=True)
    (op / f"{d.name}.json").write_text(json.dumps(d.to_json_dict()))
    chosen = [w for w in setup.workloads if w.workload.uuid in set(uuids)]
    if not chosen:
        raise InfrastructureError(f"sweep {tag}: no workload selected")
    wdir = root / "workloads" / d.op_type
    wdir.mkdir(parents=True)
    (wdir / f"{d.name}.jsonl").write_text(
        "".join(json.dumps(w.to_json_dict()) + "\n" for w in chosen))
    _copy_blobs(setup, chosen, root)
    sdir = root / "solutions" / d.name
    sdir.mkdir(parents=True)
    by_name: dict[str, str] = {}
    for sol in solutions:
        key = candidate_key(sol)
        name = _private_name(key)
        if name in by_name:
            continue
        by_name[name] = key
        doc = sol.to_json_dict() | {"name": name}
        (sdir / f"{name}.json").write_text(json.dumps(doc))
    policy = sweep_policy(setup.policy, trials=trials, profile=profile)
    summary = run_dataset(root, RunOptions(policy=policy, backend=setup.backend,
                                           jobs=setup.jobs, seed=seed,
                                           hidden_paths=list(setup.hidden),
                                           archive=setup.archive),
                          record=setup.record)
    out = Measured()
    for o in summary.outcomes:
        key = by_name[o.task.solution]
        if o.verdict is None:
            out.errors[key] = str(o.error)
            continue
        out.sweeps[key] = sweep_of(o.verdict)
        out.verdicts[key] = o.verdict.content_hash()
        out.device_s += device_seconds(o.verdict)
        if sigs := signatures_of(o.verdict):
            out.signatures[key] = sigs
    return out


def by_key(solutions: Sequence[Solution]) -> Mapping[str, Solution]:
    return {candidate_key(s): s for s in solutions}
