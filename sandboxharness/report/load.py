"""What a report reads from a dataset: its documents, trace lines, stored verdicts and,
optionally, a campaign's rounds. Every file is untrusted input: lines are size-capped, and a
bad one is one InputError naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..dataset.layout import Dataset, load_dataset
from ..dataset.verdictstore import StoredVerdict, iter_stored
from ..errors import InputError, one_line
from ..models.trace import Trace

MAX_TRACE_LINE = 8 * 1024 * 1024
"""A trace line holds a workload and a log of at most a few KiB; far past that it is refused."""
MAX_CAMPAIGN_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Round:
    round: int
    definition: str | None
    verdict: str | None
    best_mean_ms: float | None
    candidates: int | None
    hypothesis: str | None
    time: str | None


@dataclass(frozen=True)
class Campaign:
    name: str
    rounds: tuple[Round, ...]


@dataclass(frozen=True)
class ReportInput:
    dataset: Dataset
    traces: tuple[Trace, ...]
    """Every trace line, in the order FlashInfer-Bench's ``TraceSet.from_path`` reads them."""
    verdicts: tuple[StoredVerdict, ...]
    campaign: Campaign | None = None

    @property
    def root(self) -> Path:
        return self.dataset.root


def trace_files(root: Path) -> list[Path]:
    """``traces/**/*.jsonl`` sorted as FlashInfer-Bench sorts them (``sorted`` of paths)."""
    folder = root / "traces"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*.jsonl") if p.is_file() and not p.is_symlink())


def iter_traces(root: Path) -> Iterator[Trace]:
    for path in trace_files(root):
        with path.open("rb") as fh:
            n = 0
            while raw := fh.readline(MAX_TRACE_LINE + 1):
                n += 1
                where = f"{path}:{n}"
                if len(raw) > MAX_TRACE_LINE:
                    raise InputError(f"trace line over the {MAX_TRACE_LINE}-byte cap",
                                     where=where)
                if not raw.strip():
                    continue  # FlashInfer-Bench skips empty lines too
                try:
                    trace = Trace.model_validate(json.loads(raw))
                except ValidationError as exc:
                    first = exc.errors(include_url=False, include_input=False)[0]
                    loc = ".".join(str(p) for p in first["loc"]) or "(line)"
                    raise InputError(f"not a trace: field {one_line(loc, 80)}: "
                                     f"{one_line(first['msg'], 200)}", where=where) from None
                except (ValueError, RecursionError) as exc:
                    raise InputError(f"not a trace: {one_line(exc, 200)}", where=where) from None
                if trace.evaluation is None:
                    raise InputError("a workload line (no evaluation) under traces/",
                                     where=where)
                yield trace


def load_input(root: str | Path, campaign: str | Path | None = None) -> ReportInput:
    dataset = load_dataset(root)
    return ReportInput(dataset=dataset, traces=tuple(iter_traces(dataset.root)),
                       verdicts=tuple(iter_stored(dataset.root)),
                       campaign=load_campaign(Path(campaign)) if campaign else None)


# -- campaigns: the loop's state, read tolerantly (its format may grow) ----------------------

def _records(folder: Path) -> list[dict[str, Any]]:
    """Round records from ``state.json`` (``rounds`` or ``history``: a list) and from
    ``history.jsonl`` / ``rounds.jsonl`` (one object a line); later files win per round."""
    found: list[dict[str, Any]] = []
    state = folder / "state.json"
    if state.is_file():
        data = _read_json(state)
        if isinstance(data, dict):
            for key in ("rounds", "history"):
                if isinstance(data.get(key), list):
                    found.extend(r for r in data[key] if isinstance(r, dict))
    for name in ("history.jsonl", "rounds.jsonl"):
        path = folder / name
        if path.is_file():
            text = _read_text(path)
            for n, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    obj = _parse(line, f"{path}:{n}")
                    if isinstance(obj, dict):
                        found.append(obj)
    return found


def _read_text(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_CAMPAIGN_BYTES:
        raise InputError(f"{size} bytes, over the {MAX_CAMPAIGN_BYTES}-byte cap", where=str(path))
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", where=str(path)) from None


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"invalid JSON: {one_line(exc, 200)}", where=where) from None


def _read_json(path: Path) -> Any:
    return _parse(_read_text(path), str(path))


def _num(obj: dict[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def _text(obj: dict[str, Any], *keys: str) -> str | None:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and isinstance(v.get("hypothesis"), str):
            return str(v["hypothesis"])
    return None


def _round(obj: dict[str, Any]) -> Round | None:
    n = obj.get("round")
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    cands = obj.get("candidates")
    count = len(cands) if isinstance(cands, list) else cands if isinstance(cands, int) else None
    return Round(round=n, definition=_text(obj, "definition"),
                 verdict=_text(obj, "verdict", "decision"),
                 best_mean_ms=_num(obj, "best_mean_ms", "best_mean_latency_ms", "mean_ms"),
                 candidates=count, hypothesis=_text(obj, "hypothesis", "direction"),
                 time=_text(obj, "time", "finished_at", "ended_at"))


def load_campaign(folder: Path) -> Campaign | None:
    """The rounds a campaign directory records, or None when it records none (a missing
    directory is bad input: the caller named it)."""
    if not folder.is_dir():
        raise InputError("no such campaign directory", where=str(folder))
    by_round: dict[int, Round] = {}
    for rec in _records(folder):
        r = _round(rec)
        if r is not None:
            by_round[r.round] = r
    if not by_round:
        return None
    return Campaign(name=folder.resolve().name, rounds=tuple(by_round[k] for k in sorted(by_round)))
