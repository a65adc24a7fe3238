"""A quota for the one writable host directory of a job, in both backends: the job's out dir
is a plain host directory (the host must read it after the job is gone), so no mount option
bounds what a candidate writes there. A watchdog sums it every ``interval_s`` and kills the
job (the process tree or the container) past the quota (bytes or entries); overshoot is
bounded by write throughput x interval, and each file by RLIMIT_FSIZE.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


class OutDirWatch:
    def __init__(self, out_dir: Path, max_bytes: int, max_entries: int,
                 on_exceeded: Callable[[], None], interval_s: float = 0.25) -> None:
        self._dir, self._max_bytes, self._max_entries = out_dir, max_bytes, max_entries
        self._on_exceeded, self._interval = on_exceeded, interval_s
        self._stop = threading.Event()
        self.exceeded: str | None = None
        self._thread = threading.Thread(target=self._run, name="out-quota", daemon=True)
        self._thread.start()

    def usage(self) -> tuple[int, int]:
        """(bytes, entries) under the out dir, counting at most max_entries + 1 entries."""
        total, entries = 0, 0
        stack = [str(self._dir)]
        while stack and entries <= self._max_entries:
            try:
                with os.scandir(stack.pop()) as it:
                    for entry in it:
                        entries += 1
                        if entries > self._max_entries:
                            break
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        total += st.st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
            except OSError:
                continue
        return total, entries

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            used, entries = self.usage()
            if used > self._max_bytes or entries > self._max_entries:
                self.exceeded = (f"out dir over its quota ({used} bytes, {entries} entries; "
                                 f"limits {self._max_bytes} bytes, {self._max_entries} entries)")
                self._on_exceeded()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
