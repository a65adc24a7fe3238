"""What a report reads from a dataset: its documents, trace lines, stored verdicts and,
optionally, a campaign's rounds. Every file is untrusted input: lines are size-capped, and a
bad one is one InputError naming the file and line."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dataset.layout import Dataset, load_dataset
from ..dataset.tracefile import MAX_TRACE_LINE, parse_line, whole_lines
from ..dataset.verdictstore import StoredVerdict, iter_stored
from ..errors import InputError
from ..models.trace import Trace


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
    """Every trace under ``root/traces``, files sorted, lines in order, as the verdict store
    reads its lines (``dataset.tracefile.whole_lines``: a torn last line skipped)."""
    for path in trace_files(root):
        for n, raw in whole_lines(path, MAX_TRACE_LINE):
            trace = parse_line(Trace, raw, f"{path}:{n}", "trace")
            if trace.evaluation is None:
                raise InputError("a workload line (no evaluation) under traces/",
                                 where=f"{path}:{n}")
            yield trace


def load_input(root: str | Path, campaign: str | Path | None = None) -> ReportInput:
    dataset = load_dataset(root)
    return ReportInput(dataset=dataset, traces=tuple(iter_traces(dataset.root)),
                       verdicts=tuple(iter_stored(dataset.root)),
                       campaign=load_campaign(Path(campaign)) if campaign else None)


# -- campaigns: the loop's state (``loop.state``: hash-chained, verified when read) ---------

def _num(obj: dict[str, Any], key: str) -> float | None:
    v = obj.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _text(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    return v if isinstance(v, str) else None


def load_campaign(folder: Path) -> Campaign | None:
    """Round 0 (the baseline) and every finished round of the campaign in ``folder``, with the
    best full-sweep mean as it stood after each; None when no round is recorded yet. A
    missing folder, or a state whose hash chain breaks, is bad input."""
    from ..loop.state import CampaignState

    if not folder.is_dir():
        raise InputError("no such campaign directory", where=str(folder))
    state = CampaignState.open(folder)
    setup = state.last("campaign") or {}
    definition = _text(setup, "definition")
    out: list[Round] = []
    best: float | None = None
    for entry in state.entries:
        kind, body = entry["kind"], entry["body"]
        if kind == "baseline":
            best = _num(body, "best_mean_ms")
            out.append(Round(0, definition, "baseline", best, len(body.get("verdicts") or []),
                             "baseline: the starting solution", None))
        elif kind == "round" and isinstance(body.get("round"), int):
            if body.get("verdict") == "promote" and _num(body, "best_mean_ms") is not None:
                best = _num(body, "best_mean_ms")
            cands = body.get("candidates")
            out.append(Round(int(body["round"]), definition, _text(body, "verdict"), best,
                             len(cands) if isinstance(cands, list) else None,
                             _text(body, "hypothesis"), None))
    if not out:
        return None
    return Campaign(name=folder.resolve().name, rounds=tuple(out))
