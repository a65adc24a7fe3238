"""RFC 8785 (JCS) canonical JSON, fast: the C ``json`` encoder where it provably writes
the same bytes as RFC 8785, the pure-Python ``rfc8785`` package everywhere else.

The two agree on every value except: floats Python writes with an exponent or as
``X.0`` (ES6 writes ``1e-7``, ``2``), integers of 16 digits or more (RFC 8785 allows only
I-JSON integers, |n| < 2**53), and strings or keys beyond the BMP (RFC 8785 sorts keys
by UTF-16 code units). Output with such a number token or any 4-byte UTF-8 sequence goes
the slow way; both directions (writing, checking) use the same test.
"""

from __future__ import annotations

import json
import re
from typing import Any

import rfc8785

# a number token (after ':' ',' '[' and before ',' ']' '}') that may differ from ES6
_RISKY = re.compile(rb"[:,\[]-?[0-9]+(?:\.0|(?:\.[0-9]+)?[eE][-+]?[0-9]+)[,\]}]"
                    rb"|[:,\[]-?[0-9]{16,}[,\]}]")
_NON_BMP = re.compile(rb"[\xf0-\xff]")
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False, check_circular=False).encode

CanonicalizationError = rfc8785.CanonicalizationError


def _fast_safe(data: bytes) -> bool:
    return not _RISKY.search(data) and not _NON_BMP.search(data)


def dumps(obj: Any) -> bytes:
    """RFC 8785 bytes of ``obj``; raises :class:`CanonicalizationError` (non-I-JSON)."""
    if isinstance(obj, dict | list):
        try:
            data = _encode(obj).encode()
        except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
            data = b""
        if data and _fast_safe(data):
            return data
    return rfc8785.dumps(obj)


def matches(line: bytes, obj: Any) -> bool | None:
    """Whether ``line`` is exactly the RFC 8785 form of ``obj`` (parsed from ``line``):
    True/False when the fast encoder can tell, None when only ``rfc8785`` can."""
    if not _fast_safe(line):
        return None
    try:
        return _encode(obj).encode() == line
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
        return None
