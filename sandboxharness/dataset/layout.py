"""A FlashInfer-Bench dataset on disk: ``definitions/ workloads/ solutions/ traces/``.

Read as FlashInfer-Bench's ``TraceSet.from_path`` reads it (every ``*.json`` under
``definitions/`` and ``solutions/``, every ``*.jsonl`` under ``workloads/``, any depth), each
document through ``intake`` (size caps, one-line errors). Traces are written to
``traces/<op_type>/<definition>.jsonl``, where FlashInfer-Bench's ``add_traces`` puts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..intake import load_definition, load_solution, load_workloads
from ..models import Definition, Solution, WorkloadTrace


@dataclass(frozen=True)
class DefinitionEntry:
    path: Path
    definition: Definition
    workloads: tuple[WorkloadTrace, ...]
    """Every workload of the dataset for this definition, in file order."""


@dataclass(frozen=True)
class SolutionEntry:
    path: Path
    solution: Solution


@dataclass(frozen=True)
class Dataset:
    root: Path
    definitions: dict[str, DefinitionEntry]
    solutions: tuple[SolutionEntry, ...]

    def trace_path(self, definition: Definition) -> Path:
        return self.root / "traces" / definition.op_type / f"{definition.name}.jsonl"


def _files(folder: Path, suffix: str) -> list[Path]:
    if not folder.is_dir():
        return []
    # sorted like FlashInfer-Bench; never follow a link out of the dataset
    return sorted(p for p in folder.rglob(f"*{suffix}") if p.is_file() and not p.is_symlink())


def load_dataset(root: str | Path) -> Dataset:
    """Every document of the dataset, checked; InputError (one line, where) on the first bad
    one, on a duplicate name, or on a root that is not a dataset."""
    base = Path(root)
    if not (base / "definitions").is_dir():
        raise InputError("not a FlashInfer-Bench dataset: no definitions/ folder", where=str(base))
    defs: dict[str, tuple[Path, Definition]] = {}
    for path in _files(base / "definitions", ".json"):
        d = load_definition(path)
        if d.name in defs:
            raise InputError(f"duplicate definition name {d.name!r} (also in "
                             f"{defs[d.name][0]})", where=str(path))
        defs[d.name] = (path, d)
    workloads: dict[str, list[WorkloadTrace]] = {}
    for path in _files(base / "workloads", ".jsonl"):
        for wl in load_workloads(path):
            workloads.setdefault(wl.definition, []).append(wl)
    seen: dict[str, Path] = {}
    solutions = []
    for path in _files(base / "solutions", ".json"):
        s = load_solution(path)
        if s.name in seen:
            raise InputError(f"duplicate solution name {s.name!r} (also in {seen[s.name]})",
                             where=str(path))
        seen[s.name] = path
        solutions.append(SolutionEntry(path, s))
    entries = {name: DefinitionEntry(path, d, tuple(workloads.get(name, ())))
               for name, (path, d) in defs.items()}
    return Dataset(root=base, definitions=entries, solutions=tuple(solutions))


def select(dataset: Dataset, *, definitions: Sequence[str] = (),
           solutions: Sequence[str] = ()) -> list[tuple[DefinitionEntry, SolutionEntry]]:
    """The (definition, solution) pairs to run, in dataset order. A filter naming nothing in
    the dataset, or a selected solution whose definition is absent, is bad input."""
    unknown = set(definitions) - set(dataset.definitions)
    if unknown:
        raise InputError(f"--definitions names no definition of the dataset: {sorted(unknown)}",
                         where=str(dataset.root))
    names = {e.solution.name for e in dataset.solutions}
    missing = set(solutions) - names
    if missing:
        raise InputError(f"--solutions names no solution of the dataset: {sorted(missing)}",
                         where=str(dataset.root))
    pairs = []
    for entry in dataset.solutions:
        s = entry.solution
        if (definitions and s.definition not in definitions) or (
                solutions and s.name not in solutions):
            continue
        d = dataset.definitions.get(s.definition)
        if d is None:
            raise InputError(f"solution {s.name!r} is for definition {s.definition!r}, which "
                             "the dataset does not have", where=str(entry.path))
        pairs.append((d, entry))
    return pairs
