"""What one evaluation archives, and how stages hand over what they produced.

A stage that reads a full text on the trusted side (the compiler's log, a sanitizer report)
keeps only a tail in its verdict details; it :func:`publish` es the whole text, and the
pipeline archives it with what the evaluation consumed (:func:`input_artifacts`). The verdict
then names every artifact by hash (``Verdict.artifacts``).

Names: ``solution.json``, ``definition.json``, ``policy.json`` (canonical JSON: their hashes
are the verdict's candidate, definition and policy hashes), ``workloads.jsonl``,
``sources/<path>``, ``logs/candidate.log``, ``logs/reference.log``, ``logs/compiler.log``
(native builds), ``sanitizer/<tool>.log``, ``outputs/summary.json`` (every call's output and
post-call input digests), ``profile/...`` (when a profile stage publishes one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..models import Definition, Policy, Solution, WorkloadTrace, canonical_json
from .store import Archive

if TYPE_CHECKING:
    from ..stages.context import SoFar

_KEY = "archive.artifacts"


def publish(so_far: SoFar, name: str, data: bytes | str) -> None:
    """Hand a stage's artifact to the pipeline (archived only when an archive is in use)."""
    store: dict[str, bytes] = so_far.shared(_KEY, dict)
    store[name] = data.encode("utf-8", errors="replace") if isinstance(data, str) else data


def published(so_far: SoFar) -> dict[str, bytes]:
    found: dict[str, bytes] = so_far.shared(_KEY, dict)
    return dict(found)


def input_artifacts(definition: Definition, solution: Solution,
                    workloads: Iterable[WorkloadTrace], policy: Policy) -> dict[str, bytes]:
    """What the evaluation consumed, as bytes whose hashes the verdict already names."""
    out = {"solution.json": solution.canonical_bytes(),
           "definition.json": definition.canonical_bytes(),
           "policy.json": policy.canonical_bytes(),
           "workloads.jsonl": b"".join(w.canonical_bytes() + b"\n" for w in workloads)}
    for src in solution.sources:
        out[f"sources/{src.path}"] = src.content.encode("utf-8")
    return out


def _call(role: str, call: Any) -> dict[str, Any]:
    return {"role": role, "case": call.case.id, "workload": call.case.workload,
            "axes": call.case.axes, "heldout": call.case.heldout, "trial": call.trial,
            "seed": call.seed, "sampled_index": call.sampled_index,
            "digests": dict(call.bound), "error": call.error}


def output_summary(run: Any) -> bytes:
    """Every correctness call of both roles (``job.Execution``): what it returned, as the
    digests the worker bound at the moment of the call; and each timed batch's timings."""
    calls = [_call("candidate", c) for c in run.cand.calls]
    if run.ref is not None:
        calls += [_call("reference", c) for c in run.ref.calls]
    benches = [{"case": b.case.id, "workload": b.case.workload, "axes": b.case.axes,
                "seeds": b.seeds, "times_s": b.times_s,
                "dumped": {str(k): v for k, v in b.dumped.items()}}
               for b in run.cand.benches]
    return canonical_json({"calls": calls, "benchmarks": benches})


def worker_logs(run: Any) -> dict[str, str]:
    """The captured stderr of each role's worker, whole (as captured, up to the policy's
    ``max_log_bytes``; a cut is said at the end)."""
    out = {}
    for role, rr in (("candidate", run.cand), ("reference", run.ref)):
        if rr is not None and rr.exit is not None:
            cut = (f"\n[{rr.exit.dropped_log_bytes} more bytes not captured]\n"
                   if rr.exit.dropped_log_bytes else "")
            out[f"logs/{role}.log"] = rr.exit.stderr + cut
    return out


def store(archive: Archive, artifacts: Mapping[str, bytes]) -> dict[str, str]:
    """Archive every artifact; name -> hash, sorted by name."""
    return {name: archive.put(artifacts[name]) for name in sorted(artifacts)}


