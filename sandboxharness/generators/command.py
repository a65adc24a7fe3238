"""``command``: the user's own agent CLI as a generator.

Each round gets a fresh folder holding the task bundle (``bundle.json``, and ``bundle.md`` for
agents that read prose) and an empty ``out/``. The command line (an argv list, never a shell
string) may name ``{bundle}``, ``{bundle_md}``, ``{out}`` and ``{k}``; the same values are in
``SHX_TASK_BUNDLE``, ``SHX_TASK_MARKDOWN``, ``SHX_OUT_DIR`` and ``SHX_K``. The agent writes
FlashInfer-Bench Solution JSON files into ``out/``.

The agent itself is the user's tool and runs as the user (it may need the network), bounded in
time (its process group is killed past ``timeout_s``) and in the size of any file it writes
(RLIMIT_FSIZE). What it writes back is untrusted like any candidate: only regular files
directly in ``out/``, at most ``max_files`` of them and ``max_file_bytes`` each, read through
the same intake as every other document; anything else is skipped with a note. Whatever it
claims (in a description, a side file, its output) is not read: the harness measures.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError, one_line
from ..models import Solution
from .interface import GeneratorError

if TYPE_CHECKING:
    from ..loop.bundle import TaskBundle

__all__ = ["CommandGenerator"]

_LOG_TAIL = 2000


class CommandGenerator:
    name = "command"

    def __init__(self, argv: Sequence[str], workdir: Path, *, timeout_s: float = 1800.0,
                 max_files: int = 64, max_file_bytes: int = 4 * 1024 * 1024) -> None:
        if not argv:
            raise InputError("the command generator needs a command line (--command)")
        self.argv = list(argv)
        self.workdir = workdir
        self.timeout_s = timeout_s
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.notes: list[str] = []
        """What was skipped in the last round, and why."""

    def propose(self, task: TaskBundle, k: int) -> list[Solution]:
        from ..loop.bundle import render_markdown

        folder = self.workdir / f"round-{task.round}-{uuid.uuid4().hex[:8]}"
        out = folder / "out"
        out.mkdir(parents=True)
        bundle, md = folder / "bundle.json", folder / "bundle.md"
        bundle.write_text(task.model_dump_json(indent=1))
        md.write_text(render_markdown(task))
        values = {"bundle": str(bundle), "bundle_md": str(md), "out": str(out), "k": str(k)}
        argv = [a.format_map(values) if "{" in a else a for a in self.argv]
        env = dict(os.environ, SHX_TASK_BUNDLE=str(bundle), SHX_TASK_MARKDOWN=str(md),
                   SHX_OUT_DIR=str(out), SHX_K=str(k))
        rc, tail = self._run(argv, env, folder / "agent.log", folder)
        found = self._read(out, k)
        if not found:
            raise GeneratorError(f"{Path(argv[0]).name} wrote no usable solution into {out} "
                                 f"(exit {rc}; {'; '.join(self.notes[:3]) or one_line(tail, 300)})")
        return found

    def _run(self, argv: list[str], env: dict[str, str], log: Path, cwd: Path
             ) -> tuple[int, str]:
        cap = self.max_file_bytes * 4

        def limit_files() -> None:  # in the child: no file it writes may grow past the cap
            resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))

        with log.open("wb") as fh:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                        env=env, cwd=cwd, start_new_session=True,
                                        close_fds=True, preexec_fn=limit_files)  # noqa: PLW1509
            except OSError as exc:
                raise GeneratorError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
            deadline = time.monotonic() + self.timeout_s
            try:
                while proc.poll() is None:
                    if time.monotonic() > deadline:
                        raise GeneratorError(f"{Path(argv[0]).name}: timed out after "
                                             f"{self.timeout_s:g} s (its processes killed)")
                    time.sleep(0.05)
            finally:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)  # nothing of the agent outlives it
                proc.wait()
        with log.open("rb") as rh:
            rh.seek(max(0, log.stat().st_size - _LOG_TAIL))
            tail = rh.read().decode("utf-8", "replace")
        return proc.returncode, tail

    def _read(self, out: Path, k: int) -> list[Solution]:
        from ..intake import load_solution

        self.notes = []
        entries = sorted(out.iterdir(), key=lambda p: p.name)
        if len(entries) > self.max_files:
            self.notes.append(f"{len(entries)} entries in out/, only the first "
                              f"{self.max_files} considered")
            entries = entries[:self.max_files]
        found: list[Solution] = []
        for p in entries:
            if p.is_symlink() or not p.is_file() or p.suffix != ".json":
                self.notes.append(f"{p.name}: not a regular .json file, skipped")
                continue
            if p.stat().st_size > self.max_file_bytes:
                self.notes.append(f"{p.name}: larger than {self.max_file_bytes} bytes, skipped")
                continue
            try:
                found.append(load_solution(p))
            except InputError as exc:
                self.notes.append(f"{p.name}: {exc}")
            if len(found) >= k:
                break
        return found
