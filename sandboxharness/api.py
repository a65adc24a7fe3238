"""File-level convenience API: what the CLI calls, and what other harnesses import."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ._internal import shipped
from .archive import Archive
from .errors import InputError
from .intake import check_pairing, load_definition, load_policy, load_solution, load_workloads
from .models import Definition, Policy, Verdict, WorkloadTrace
from .pipeline import Harness, Observer
from .sandbox import select_backend


def policies_dir() -> Path:
    """Shipped policies: ``$SANDBOXHARNESS_POLICY_DIR``, the checkout's ``policies/``, or the
    installed package's copy (see :mod:`sandboxharness._internal.shipped`)."""
    return shipped.policies_dir()


def default_policy() -> Policy:
    """The shipped ``default.yaml``; InfrastructureError if it is missing (never a built-in)."""
    return load_policy(shipped.shipped_file(shipped.DEFAULT_POLICY))


def find_workloads(definition_path: Path, definition: Definition) -> Path:
    """FlashInfer-Bench layout: ``<root>/workloads/[<op>/]<name>.jsonl`` beside ``definitions/``."""
    name = f"{definition.name}.jsonl"
    for root in (definition_path.parent.parent, definition_path.parent.parent.parent):
        for cand in (root / "workloads" / name, root / "workloads" / definition.op_type / name):
            if cand.is_file():
                return cand
    raise InputError("no workloads file found beside the definition; pass --workloads",
                     where=str(definition_path))


def evaluate_files(definition: str | Path, solution: str | Path,
                   workloads: str | Path | None = None, policy: str | Path | Policy | None = None,
                   *, backend: str | None = None, seed: int | None = None,
                   blob_root: str | Path | None = None,
                   observer: Observer | None = None,
                   hidden_paths: Sequence[str | Path] = (),
                   archive: str | Path | Archive | None = None) -> Verdict:
    """Load, cross-check and evaluate one solution. Raises HarnessError for bad input.

    ``hidden_paths``: host files the candidate must never see (audit log, signing keys); the
    process backend covers them in the worker's view. ``archive``: a folder (created if
    missing) or an :class:`Archive` that keeps every artifact, named in ``verdict.artifacts``."""
    d_path = Path(definition)
    d = load_definition(d_path)
    s = load_solution(solution)
    w_path = Path(workloads) if workloads else find_workloads(d_path, d)
    wl: list[WorkloadTrace] = load_workloads(w_path)
    check_pairing(d, s, wl, where=str(solution))
    pol = policy if isinstance(policy, Policy) else (
        load_policy(policy) if policy else default_policy())
    store = archive if isinstance(archive, Archive) or archive is None else Archive(
        archive, create=True)
    hidden = [*hidden_paths, *([store.root] if store is not None else [])]  # others' artifacts
    sandbox = select_backend(backend or pol.sandbox.backend, pol,
                             hidden_paths=[p for p in hidden if Path(p).exists()])
    # FlashInfer-Bench blob paths are relative to the dataset root (workloads/<op>/x.jsonl)
    root = Path(blob_root) if blob_root else (
        w_path.parent.parent.parent if w_path.parent.parent.name == "workloads"
        else w_path.parent.parent)
    return Harness(pol, sandbox=sandbox, observer=observer, archive=store).evaluate(
        d, s, wl, seed=seed, blob_root=root)
