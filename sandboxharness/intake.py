"""Load and validate untrusted documents: one clear error line, never a traceback.

Everything a document can make the host do is bounded before the models see it: file size,
nesting depth and value count (YAML aliases expanded), finite numbers in policies; then the
models' own caps (string lengths, list sizes, axis ranges, source paths), the definition's
constraints (parsed by the bounded evaluator) and, across documents, the tensor sizes and
scalar ranges a workload asks for. A bad document is an :class:`InputError` naming the file
and the field, raised before any candidate code runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputError, PolicyError, one_line
from .models import Definition, Policy, Solution, WorkloadTrace
from .models.definition import ITEM_BYTES
from .models.workload import ScalarInput

MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
"""Cap on any JSON document read from disk (a definition with its reference, a solution)."""
MAX_POLICY_BYTES = 1024 * 1024
"""Cap on a YAML policy (the shipped ones are ~3 KB; YAML parsing is slow per byte)."""
MAX_DEPTH = 32
"""Nesting of any document (FlashInfer-Bench's deepest is 7)."""
MAX_VALUES = 100_000
"""Values in one document or one workload line, YAML aliases counted as expanded."""
MAX_WORKLOADS = 100_000
"""Lines in one workloads file."""
MAX_WORKLOAD_BYTES = 256 * 1024**3
"""All tensors of one workload together: more than any accelerator holds, so a workload past
it cannot run anywhere and is bad input (smaller limits are the policy's: ``max_result_mb``)."""

M = TypeVar("M", bound=BaseModel)
_INT_RANGE = {"int64": 63, "int32": 31, "int16": 15, "int8": 7}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.38e38, "float32": 3.4028e38,
              "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, "float4_e2m1": 6.0}


def _read_text(path: Path, cap: int = MAX_DOCUMENT_BYTES) -> str:
    try:
        if not path.is_file():
            raise InputError("no such file" if not path.exists() else "not a regular file",
                             where=str(path))
        size = path.stat().st_size
        if size > cap:
            raise InputError(f"file is {size} bytes, over the {cap}-byte cap", where=str(path))
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", where=str(path)) from None
    except OSError as exc:
        raise InputError(exc.strerror or str(exc), where=str(path)) from None


def _field(loc: tuple[int | str, ...] | list[Any]) -> str:
    return ".".join(one_line(p, 60) for p in loc) or "(document)"


def _check_tree(data: Any, where: str, *, finite: bool = False,
                error: type[InputError] = InputError) -> None:
    """Depth and value count of a parsed document (iterative: no recursion to exhaust);
    ``finite``: every float finite too."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    count = 0
    while stack:
        node, loc = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise error(f"more than {MAX_VALUES} values (aliases expanded)", where=where)
        if len(loc) > MAX_DEPTH:
            raise error(f"field {_field(loc[:4])}...: nested deeper than {MAX_DEPTH} levels",
                        where=where)
        if isinstance(node, dict):
            stack.extend((v, (*loc, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(node))
        elif finite and isinstance(node, float) and not math.isfinite(node):
            raise error(f"field {_field(loc)}: {node} is not a finite number", where=where)


def _validation_message(exc: ValidationError) -> str:
    """One line for a pydantic error: the first problem's field and message (both cut and
    escaped: a field name or message may echo the document), and how many more there are."""
    first = exc.errors(include_url=False, include_input=False)[0]
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    msg = one_line(first["msg"].removeprefix("Value error, "), 300)
    if not first["loc"]:  # a whole-document check: its message names the fields
        return f"{msg}{more}"
    return f"field {_field(first['loc'])}: {msg}{more}"


def parse_model(model: type[M], data: Any, where: str,
                error: type[InputError] = InputError) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(_validation_message(exc), where=where) from None
    except (RecursionError, MemoryError):
        raise error("document too complex to validate", where=where) from None


def _parse_json(text: str, where: str, line: bool = False) -> Any:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if line else f"line {exc.lineno} column {exc.colno}"
        raise InputError(f"invalid JSON at {at}: {exc.msg}", where=where) from None
    except RecursionError:
        raise InputError(f"invalid JSON: nested too deeply (the cap is {MAX_DEPTH} levels)",
                         where=where) from None
    except (ValueError, MemoryError) as exc:  # e.g. an integer of more than 4300 digits
        raise InputError(f"invalid JSON: {one_line(exc, 200)}", where=where) from None
    _check_tree(data, where)
    return data


def _load_json(path: Path) -> Any:
    return _parse_json(_read_text(path), str(path))


def load_definition(path: str | Path) -> Definition:
    d = parse_model(Definition, _load_json(Path(path)), str(path))
    check_constraints(d, str(path))
    return d


def check_constraints(definition: Definition, where: str) -> None:
    """Parse the constraints with the bounded evaluator: one it cannot judge within its
    bounds (``M ** 1000000000 > 0``, unknown names, too long) is bad input now."""
    from .stages import constraints  # the evaluator lives with the stages that use it

    try:
        constraints.parse(definition)
    except InputError as exc:
        text = exc.diagnostics()
        raise InputError(f"field constraints: {text.removeprefix(f'{exc.where}: ')}",
                         where=where) from None
    except (RecursionError, MemoryError):
        raise InputError("field constraints: too complex to evaluate", where=where) from None


def load_solution(path: str | Path) -> Solution:
    return parse_model(Solution, _load_json(Path(path)), str(path))


def iter_workloads(path: str | Path) -> Iterator[WorkloadTrace]:
    p = Path(path)
    count = 0
    # "\n" only: str.splitlines would also split inside JSON strings at U+2028 and friends
    for lineno, line in enumerate(_read_text(p).split("\n"), start=1):
        if not line.strip():
            continue
        count += 1
        if count > MAX_WORKLOADS:
            raise InputError(f"more than {MAX_WORKLOADS} workloads", where=str(p))
        where = f"{p}:{lineno}"
        yield parse_model(WorkloadTrace, _parse_json(line, where, line=True), where)


def load_workloads(path: str | Path) -> list[WorkloadTrace]:
    items = list(iter_workloads(path))
    if not items:
        raise InputError("no workloads in file", where=str(path))
    return items


def _yaml_depth(text: str, where: str) -> None:
    """Depth and event count from the event stream, before anything is composed (PyYAML's
    composer recurses, and is quadratic on deep nesting): stops at the first excess."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = events = 0
    for ev in yaml.parse(text, Loader=loader):
        events += 1
        if events > MAX_VALUES:
            raise PolicyError(f"more than {MAX_VALUES} YAML events", where=where)
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise PolicyError(f"nested deeper than {MAX_DEPTH} levels", where=where)
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


def load_policy(path: str | Path) -> Policy:
    p = Path(path)
    text = _read_text(p, MAX_POLICY_BYTES)
    try:
        _yaml_depth(text, str(p))
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        why = one_line(getattr(exc, "problem", None) or exc, 200)
        raise PolicyError(f"invalid YAML{at}: {why}", where=str(p)) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # huge integers, ...
        raise PolicyError(f"invalid YAML: {one_line(exc, 200)}", where=str(p)) from None
    if not isinstance(data, dict):
        raise PolicyError("a policy must be a YAML mapping", where=str(p))
    _check_tree(data, str(p), finite=True, error=PolicyError)
    return parse_model(Policy, data, str(p), PolicyError)


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
    from .stages import constraints as cons

    parsed = cons.parse(definition)
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
        check_workload(definition, wl, where)
        env = cons.env_of(definition, dict(wl.workload.axes))
        for c in parsed:  # judged on the workload's own sizes, within the evaluator's bounds
            try:
                cons.holds(c, env)
            except KeyError:
                continue
            except cons.ConstraintError as exc:
                raise InputError(f"workload {wl.workload.uuid}: constraint {c.text[:120]!r} "
                                 f"cannot be evaluated: {exc}", where=where) from None


def check_workload(definition: Definition, wl: WorkloadTrace, where: str) -> None:
    """A workload's tensors fit the global size cap, its scalars their dtype's range."""
    axes = wl.workload.axes
    total = 0
    for spec in (*definition.inputs.values(), *definition.outputs.values()):
        total += math.prod(definition.resolve_shape(spec, axes) or ()) * ITEM_BYTES[spec.dtype]
    if total > MAX_WORKLOAD_BYTES:
        big = max(definition.var_axes, key=lambda n: axes[n], default="?")
        raise InputError(f"workload {wl.workload.uuid}: its tensors need {total / 2**30:.3g} GiB, "
                         f"over the {MAX_WORKLOAD_BYTES // 2**30} GiB cap (axis {big} = "
                         f"{axes.get(big)})", where=where)
    for name, src in wl.workload.inputs.items():
        scalar = definition.inputs.get(name)
        if scalar is None or not isinstance(src, ScalarInput):
            continue
        v, dt, bad = src.value, scalar.dtype, None
        if dt in _INT_RANGE or dt == "uint8":
            lo, hi = (0, 255) if dt == "uint8" else (-(2 ** _INT_RANGE[dt]), 2 ** _INT_RANGE[dt] - 1)
            if isinstance(v, float) and not v.is_integer() or not lo <= v <= hi:
                bad = f"outside {dt}'s range [{lo}, {hi}]"
        elif dt in _FLOAT_MAX and abs(v) > _FLOAT_MAX[dt]:
            bad = f"outside {dt}'s finite range (|value| <= {_FLOAT_MAX[dt]:g})"
        if bad:
            raise InputError(f"workload {wl.workload.uuid}: scalar input {name!r} = {v!r} is "
                             f"{bad}", where=where)
