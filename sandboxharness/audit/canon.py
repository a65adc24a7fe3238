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

# a number token (before ',' ']' '}') Python may write differently from ES6: "2.0",
# "1e-07" - each pattern starts with a literal, so the scan is a fast memchr
_INTEGRAL = re.compile(rb"\.0[,\]}]")
_EXP_LOWER = re.compile(rb"e[-+]?[0-9]+[,\]}]")
_EXP_UPPER = re.compile(rb"E[-+]?[0-9]+[,\]}]")
# an integer of 16 digits or more (RFC 8785 allows |n| < 2**53): digits -> "0",
# delimiters -> ":", so it is a plain substring search
_DIGITS = bytes(48 if chr(c).isdigit() and c < 128 else 58 if chr(c) in ":,[" else
                c if c == 45 else 32 for c in range(256))
_LONG_INT, _LONG_NEG = b":" + b"0" * 16, b":-" + b"0" * 16


def _risky(data: bytes) -> bool:
    if _INTEGRAL.search(data) or _EXP_LOWER.search(data) or _EXP_UPPER.search(data):
        return True
    mapped = data.translate(_DIGITS)
    return _LONG_INT in mapped or _LONG_NEG in mapped
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


def encode(obj: Any) -> bytes:
    """The C encoder's bytes, unchecked: RFC 8785 for a value parsed by :func:`loads` from
    a line :func:`same` accepted (its numbers and characters were checked there)."""
    return _encode(obj).encode()


def _integral(obj: Any) -> Any:
    """``obj`` with integral floats as ints: ES6 writes 2.0 as "2" (and -0.0 as "0")."""
    if type(obj) is float and obj.is_integer() and abs(obj) < 2**53:
        return int(obj)
    if type(obj) is dict:
        return {k: _integral(v) for k, v in obj.items()}
    if type(obj) is list:
        return [_integral(v) for v in obj]
    return obj


def _fast(obj: Any) -> tuple[bytes | None, bytes]:
    """The C encoder's bytes if they are RFC 8785, and the bytes either way."""
    try:
        data = _encode(obj).encode()
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
        return None, b""
    if _risky(data) or not (data.isascii() or not _NON_BMP.search(data)):
        return None, data
    return data, data


def dumps(obj: Any) -> bytes:
    """RFC 8785 bytes of ``obj``; raises :class:`CanonicalizationError` (non-I-JSON)."""
    if isinstance(obj, dict | list):
        data, raw = _fast(obj)
        if data is None and b".0" in raw:  # "2.0": try it as 2
            data = _fast(_integral(obj))[0]
        if data is not None:
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
