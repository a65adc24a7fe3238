"""The dataset's trace files: appended whole lines only, read back for ``--resume``.

A run appends each candidate's traces to ``traces/<op_type>/<definition>.jsonl`` in ONE
``write`` of whole lines followed by ``fsync``; only the coordinator writes. A line cut by a
crash (no final newline) is dropped before the next append, so a file never holds half a
trace for FlashInfer-Bench to choke on and no whole line is ever lost.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import InputError, one_line
from ..models.trace import Trace

Model = TypeVar("Model", bound=BaseModel)
MAX_TRACE_LINE = 8 * 1024 * 1024
"""A trace line holds a workload and a log of at most a few KiB; far past that it is refused."""

HARNESS_LIB = "sandboxharness"
POLICY_LIB = "sandboxharness.policy"
"""``evaluation.environment.libs`` keys: the harness version and the policy's sha256, the two
things ``--resume`` requires to match before it reuses a trace."""


def repair(path: Path) -> int:
    """Drop a trailing partial line; returns the bytes removed."""
    if not path.is_file():
        return 0
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        # walk back to the last newline, in blocks
        pos = size
        while pos > 0:
            step = min(65536, pos)
            fh.seek(pos - step)
            block = fh.read(step)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = pos - step + cut + 1
                break
            pos -= step
        else:
            keep = 0
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
        return size - keep


class LineAppender:
    """Whole JSON lines appended to run files, fsynced, a torn tail dropped before a file's
    first append (thread-safe: one per run, the coordinator's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._repaired: set[Path] = set()

    def append_bytes(self, path: Path, data: bytes) -> None:
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path not in self._repaired:
                repair(path)
                self._repaired.add(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)


class TraceWriter(LineAppender):
    """One writer for a run's trace files."""

    def append(self, path: Path, traces: Iterable[Trace]) -> int:
        data = "".join(t.model_dump_json() + "\n" for t in traces).encode("utf-8")
        if data:
            self.append_bytes(path, data)
        return data.count(b"\n")


def whole_lines(path: Path, cap: int, *, strict: bool = True) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each whole, non-blank line of a file ``LineAppender`` writes, a line at
    a time (never the whole file). A torn last line (a crash mid-append) ends the file; a line
    over ``cap`` bytes is an InputError, or skipped where not ``strict``."""
    with path.open("rb") as fh:
        n = 0
        while raw := fh.readline(cap + 1):
            n += 1
            if len(raw) > cap:
                if strict:
                    raise InputError(f"line over the {cap}-byte cap", where=f"{path}:{n}")
                while raw and not raw.endswith(b"\n"):  # the rest of it, a bounded read at a time
                    raw = fh.readline(cap + 1)
                continue
            if not raw.endswith(b"\n"):
                return
            if raw.strip():
                yield n, raw


def parse_line(model: type[Model], raw: bytes, where: str, what: str) -> Model:
    """One JSON line as ``model``; anything else is one InputError naming the field."""
    try:
        return model.model_validate(json.loads(raw))
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "(line)"
        raise InputError(f"not a {what}: field {one_line(field, 80)}: "
                         f"{one_line(first['msg'], 200)}", where=where) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not a {what}: {one_line(exc, 200)}", where=where) from None


def traced(path: Path, *, harness: str, policy_sha256: str) -> set[tuple[str, str]]:
    """(solution, workload uuid) pairs already traced in ``path`` by this harness version under
    this policy. Lines that are not ours (another tool's traces) or do not parse are ignored:
    resuming re-runs what it cannot prove was done."""
    done: set[tuple[str, str]] = set()
    if not path.is_file():
        return done
    for _, raw in whole_lines(path, MAX_TRACE_LINE, strict=False):
        try:
            obj = json.loads(raw)
            libs = obj["evaluation"]["environment"]["libs"]
            if libs.get(HARNESS_LIB) == harness and libs.get(POLICY_LIB) == policy_sha256:
                done.add((str(obj["solution"]), str(obj["workload"]["uuid"])))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            continue
    return done
