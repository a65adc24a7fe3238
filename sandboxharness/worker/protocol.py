"""Length-prefixed JSON frames on a private channel (never the candidate's stdout).

The host trusts nothing a frame *claims*; frames only carry requests, metadata and raw
timings. Outputs travel as files and are judged on the host.
"""

from __future__ import annotations

import json
from typing import Any

MAGIC = b"SHW1"
HEADER = 8
MAX_FRAME = 4 * 1024 * 1024


class ProtocolError(Exception):
    """A malformed or oversized frame."""


def encode(msg: dict[str, Any]) -> bytes:
    payload = json.dumps(msg, separators=(",", ":"), allow_nan=True).encode()
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME}")
    return MAGIC + len(payload).to_bytes(4, "big") + payload


def parse_header(header: bytes) -> int:
    if len(header) != HEADER or header[:4] != MAGIC:
        raise ProtocolError("bad frame header")
    size = int.from_bytes(header[4:], "big")
    if size > MAX_FRAME:
        raise ProtocolError(f"announced frame of {size} bytes exceeds {MAX_FRAME}")
    return size


def decode(payload: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("frame is not a JSON object")
    return msg
