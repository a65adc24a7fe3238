"""What a dataset run shows while it goes, and what it logs.

On a terminal: a live panel (candidates done / failed / running, the stages finishing, the GPU
lanes, an ETA). Piped: one plain line per finished candidate, never wrapped. ``--log-file``:
one JSON line per event (structlog), at ``--log-level``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

import structlog
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..dataset import RunEvent
from .render import literal

LEVELS = ("debug", "info", "warning", "error")


def _line(event: RunEvent, done: int, total: int) -> str:
    o = event.outcome
    assert o is not None  # noqa: S101  (a done event carries its outcome)
    what = f"{event.task.definition}/{event.task.solution}"
    if o.verdict is None:
        return literal(f"[{done}/{total}] ERROR    {what}  {o.wall_s:6.1f} s  {o.error}")
    codes = sorted({r.code.value for r in o.verdict.reasons})
    tail = f"  ({', '.join(codes)})" if codes else ""
    return literal(f"[{done}/{total}] {o.verdict.decision.upper():<8} {what}  "
                   f"{o.wall_s:6.1f} s  {o.traces} trace(s){tail}")


class Progress:
    """Receives the run's events (serialised by the engine) and shows them."""

    def __init__(self, console: Console, total: int, *, live: bool) -> None:
        self.console, self.total = console, total
        self.done = self.failed = self.skipped = 0
        self.running: dict[str, str] = {}  # candidate -> last stage finished
        self.recent: deque[str] = deque(maxlen=6)
        self.t0 = time.monotonic()
        self._live = Live(console=console, refresh_per_second=4, transient=True) if live else None

    def __enter__(self) -> Progress:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def __call__(self, event: RunEvent) -> None:
        key = f"{event.task.definition}/{event.task.solution}"
        if event.kind == "skip":
            self.skipped += 1
            self.total -= 1
        elif event.kind == "start":
            self.running[key] = "starting"
        elif event.kind == "stage" and event.stage is not None:
            self.running[key] = f"{event.stage.stage.value} {event.stage.status}"
        elif event.kind == "done":
            self.running.pop(key, None)
            self.done += 1
            o = event.outcome
            if o is not None and (o.verdict is None or o.verdict.decision != "promote"):
                self.failed += 1
            line = _line(event, self.done, self.total)
            if self._live is None:
                print(line, file=sys.stderr, flush=True)
            else:
                self.recent.append(line)
        if self._live is not None:
            self._live.update(self._panel())

    def _panel(self) -> Group:
        elapsed = time.monotonic() - self.t0
        eta = (elapsed / self.done * (self.total - self.done)) if self.done else None
        head = Text(f"{self.done}/{self.total} done, {self.failed} not promoted, "
                    f"{len(self.running)} running, {self.skipped} resumed; "
                    f"{elapsed:.0f} s" + (f", ETA {eta:.0f} s" if eta is not None else ""))
        table = Table(box=None, show_header=False)
        for name, stage in sorted(self.running.items()):
            table.add_row(Text(literal(name)), Text(literal(stage)))
        return Group(head, table, *(Text(r) for r in self.recent))


class RunLog:
    """JSON lines, one per event: candidate start/end, stage end."""

    def __init__(self, path: Path, level: str) -> None:
        self._fh: IO[str] = path.open("a", encoding="utf-8")
        self._log = structlog.wrap_logger(
            structlog.PrintLogger(self._fh),
            processors=[structlog.processors.add_log_level,
                        structlog.processors.TimeStamper(fmt="iso", utc=True),
                        structlog.processors.JSONRenderer(sort_keys=True)],
            wrapper_class=structlog.make_filtering_bound_logger(
                logging.getLevelName(level.upper())))

    def __call__(self, event: RunEvent) -> None:
        fields: dict[str, Any] = {"definition": event.task.definition,
                                  "solution": event.task.solution}
        if event.kind == "stage" and event.stage is not None:
            host = event.stage.details.get("host_s")
            if isinstance(host, dict):  # where the time went (benchmarks read it)
                fields["host_s"] = host
            tools = event.stage.details.get("tools")
            if isinstance(tools, dict):  # side-by-side tools: the slowest one is the floor
                fields["tool_wall_s"] = {name: t.get("wall_s") for name, t in tools.items()
                                         if isinstance(t, dict)}
            self._log.info("stage.end", stage=event.stage.stage.value,
                            status=event.stage.status, duration_s=event.stage.duration_s,
                            reasons=[r.code.value for r in event.stage.reasons], **fields)
        elif event.kind == "start":
            self._log.info("candidate.start", **fields)
        elif event.kind == "skip":
            self._log.info("candidate.resumed", **fields)
        elif event.kind == "done" and event.outcome is not None:
            o = event.outcome
            if o.verdict is None:
                self._log.error("candidate.error", error=str(o.error),
                                error_type=type(o.error).__name__, wall_s=o.wall_s, **fields)
            else:
                self._log.info("candidate.end", decision=o.verdict.decision,
                               reasons=[r.code.value for r in o.verdict.reasons],
                               traces=o.traces, wall_s=o.wall_s, **fields)
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
