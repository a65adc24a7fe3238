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
_RISKY = re.compile(rb"[:,\[]-?[0-9]{16,}[,\]}]|[eE][-+]?[0-9]+[,\]}]|\.0[,\]}]")
_NON_BMP = re.compile(rb"[\xf0-\xff]")
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False, check_circular=False).encode

CanonicalizationError = rfc8785.CanonicalizationError


class Undecided(Exception):  # noqa: N818 - a signal, not an error
    """The fast path cannot tell: use ``rfc8785``."""


def _float(literal: str) -> float:
    value = float(literal)
    if "e" in literal or "E" in literal or literal.endswith(".0") or 0 < abs(value) < 1e-4:
        raise Undecided
    return value


def _int(literal: str) -> int:
    if len(literal) > 15:
        raise Undecided
    return int(literal)


_decode = json.JSONDecoder(parse_float=_float, parse_int=_int).decode


def loads(data: bytes) -> tuple[Any, str]:
    """``json.loads`` of UTF-8 bytes (and the text), raising :class:`Undecided` for a
    number whose ES6 form Python's encoder would not write (so :func:`same` can compare
    by re-encoding)."""
    text = data.decode("utf-8")
    return _decode(text), text


def dumps(obj: Any) -> bytes:
    """RFC 8785 bytes of ``obj``; raises :class:`CanonicalizationError` (non-I-JSON)."""
    if isinstance(obj, dict | list):
        try:
            data = _encode(obj).encode()
        except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
            data = b""
        if data and not _RISKY.search(data) and (data.isascii() or not _NON_BMP.search(data)):
            return data
    return rfc8785.dumps(obj)


def same(text: str, obj: Any) -> bool | None:
    """Whether ``text`` is exactly the RFC 8785 form of ``obj``, parsed from it by
    :func:`loads`: True/False when the fast encoder can tell, None when only
    ``rfc8785`` can (characters beyond the BMP, NaN)."""
    if not text.isascii() and any(ord(c) > 0xFFFF for c in text):
        return None
    try:
        return _encode(obj) == text
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
        return None
