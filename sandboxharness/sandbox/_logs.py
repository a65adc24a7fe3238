"""Capped capture of a child's log stream: keep the first N bytes, count the rest."""

from __future__ import annotations

import threading
from typing import IO


class CappedReader:
    def __init__(self, stream: IO[bytes], cap: int) -> None:
        self._stream, self._cap = stream, cap
        self._buf = bytearray()
        self.dropped = 0
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            chunk = self._stream.read1(65536) if hasattr(self._stream, "read1") else b""
            if not chunk:
                return
            room = self._cap - len(self._buf)
            self._buf += chunk[: max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self, timeout: float = 2.0) -> str:
        self._thread.join(timeout)
        return self._buf.decode("utf-8", errors="replace")
