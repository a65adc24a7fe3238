"""The container's stdio over Docker's attach socket: one hijacked connection, multiplexed.

With ``tty=False`` Docker frames every chunk with an 8-byte header: stream type (1 stdout,
2 stderr), three zero bytes, a big-endian length. A reader thread demultiplexes: stdout (the
worker's reply channel) goes to a bounded buffer that :meth:`recv` drains; stderr (the
worker's log) is kept up to a cap and the rest counted. Writes go straight to the socket
(Docker forwards them to the container's stdin).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

STDOUT, STDERR = 1, 2
HEADER = 8


class AttachStream:
    def __init__(self, sock: Any, log_cap: int, high_water: int) -> None:
        # docker-py hands back a SocketIO over a unix socket (or the socket itself)
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._holder = sock  # keeps the HTTP response (and so the connection) alive
        self._sock.settimeout(None)  # bounded by the job deadline: the kill closes the stream
        self._cap, self._high = log_cap, high_water
        self._out = bytearray()
        self._log = bytearray()
        self.dropped = 0
        self._eof = False
        self._closed = False
        self.error: str | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, name="docker-attach", daemon=True)
        self._thread.start()

    # -- reader thread ----------------------------------------------------------------------
    def _read_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(n - len(buf))
            except OSError as exc:
                if not self._closed:
                    self.error = f"{type(exc).__name__}: {exc}"
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _pump(self) -> None:
        try:
            while True:
                header = self._read_exact(HEADER)
                if header is None:
                    return
                kind, size = header[0], int.from_bytes(header[4:], "big")
                payload = self._read_exact(size) if size else b""
                if payload is None:
                    return
                if kind == STDOUT:
                    with self._cond:
                        # back-pressure: a flood on stdout stalls the container, not our memory
                        while len(self._out) >= self._high and not self._closed:
                            self._cond.wait(0.5)
                        self._out += payload
                        self._cond.notify_all()
                else:  # stderr (and anything unexpected) is log, capped
                    room = max(self._cap - len(self._log), 0)
                    self._log += payload[:room]
                    self.dropped += len(payload) - min(room, len(payload))
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    # -- host side --------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        if self._closed or self._eof:
            raise BrokenPipeError("the container's stdin is closed")
        self._sock.sendall(data)

    def recv(self, max_bytes: int, timeout: float) -> bytes:
        until = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while not self._out and not self._eof:
                left = until - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._cond.wait(left)
            data = bytes(self._out[:max_bytes])
            del self._out[:max_bytes]
            self._cond.notify_all()
            return data

    def eof(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the container to close its output; True if it did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._eof, timeout)

    def close(self, join_s: float = 2.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the engine
        self._sock.close()
        close = getattr(self._holder, "close", None)
        if callable(close):
            try:
                close()
            except OSError:
                pass
        self._thread.join(join_s)

    def log_text(self) -> str:
        return self._log.decode("utf-8", errors="replace")
