"""Load and validate untrusted documents: one clear error line, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputError, PolicyError
from .models import Definition, Policy, Solution, WorkloadTrace

MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
"""Cap on any JSON/YAML document read from disk (a definition with its reference, a solution)."""

M = TypeVar("M", bound=BaseModel)


def _read_text(path: Path) -> str:
    try:
        if not path.is_file():
            raise InputError("no such file" if not path.exists() else "not a regular file",
                             where=str(path))
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise InputError(f"file is {size} bytes, over the {MAX_DOCUMENT_BYTES}-byte cap",
                             where=str(path))
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", where=str(path)) from None
    except OSError as exc:
        raise InputError(exc.strerror or str(exc), where=str(path)) from None


def _validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(document)"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    msg = first["msg"].removeprefix("Value error, ")
    return f"field {loc}: {msg}{more}"


def parse_model(model: type[M], data: Any, where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(_validation_message(exc), where=where) from None


def _load_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                         where=str(path)) from None


def load_definition(path: str | Path) -> Definition:
    return parse_model(Definition, _load_json(Path(path)), str(path))


def load_solution(path: str | Path) -> Solution:
    return parse_model(Solution, _load_json(Path(path)), str(path))


def iter_workloads(path: str | Path) -> Iterator[WorkloadTrace]:
    p = Path(path)
    for lineno, line in enumerate(_read_text(p).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{p}:{lineno}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON at column {exc.colno}: {exc.msg}", where=where) from None
        yield parse_model(WorkloadTrace, data, where)


def load_workloads(path: str | Path) -> list[WorkloadTrace]:
    items = list(iter_workloads(path))
    if not items:
        raise InputError("no workloads in file", where=str(path))
    return items


def load_policy(path: str | Path) -> Policy:
    p = Path(path)
    try:
        data = yaml.safe_load(_read_text(p))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise PolicyError(f"invalid YAML{at}: {getattr(exc, 'problem', exc)}", where=str(p)) from None
    if not isinstance(data, dict):
        raise PolicyError("a policy must be a YAML mapping", where=str(p))
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(_validation_message(exc), where=str(p)) from None


def detect_kind(path: Path) -> str:
    """Which document a file holds, for ``validate``: by extension, then by its keys."""
    if path.suffix in (".yaml", ".yml"):
        return "policy"
    if path.suffix == ".jsonl":
        return "workloads"
    data = _load_json(path)
    if isinstance(data, dict):
        if "reference" in data and "axes" in data:
            return "definition"
        if "spec" in data and "sources" in data:
            return "solution"
    raise InputError("cannot tell whether this is a definition, solution, workload file or policy",
                     where=str(path))


def validate_file(path: str | Path) -> str:
    """Validate one document of any kind; returns its kind, raises :class:`InputError`."""
    p = Path(path)
    kind = detect_kind(p)
    {"policy": load_policy, "workloads": load_workloads,
     "definition": load_definition, "solution": load_solution}[kind](p)
    return kind


def check_pairing(definition: Definition, solution: Solution,
                  workloads: list[WorkloadTrace] | None, where: str) -> None:
    """Cross-document consistency the schemas alone cannot see."""
    if solution.definition != definition.name:
        raise InputError(f"solution is for definition {solution.definition!r}, "
                         f"not {definition.name!r}", where=where)
    for wl in workloads or []:
        if wl.definition != definition.name:
            raise InputError(f"workload {wl.workload.uuid} is for {wl.definition!r}", where=where)
        missing = set(definition.var_axes) - set(wl.workload.axes)
        if missing:
            raise InputError(f"workload {wl.workload.uuid} lacks var axes {sorted(missing)}",
                             where=where)
        absent = {n for n, s in definition.inputs.items() if not s.optional} - set(
            wl.workload.inputs)
        if absent:
            raise InputError(f"workload {wl.workload.uuid} lacks inputs {sorted(absent)}",
                             where=where)
