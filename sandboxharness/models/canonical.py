"""RFC 8785 (JCS) canonical JSON, the one implementation (documents, verdicts, the audit
log), fast: a C encoder where it provably writes the same bytes as RFC 8785, the pure-Python
``rfc8785`` package everywhere else.

Writing uses the stdlib's C encoder (it refuses NaN; orjson would write ``null``);
checking a log line parses and re-encodes it with orjson (5x faster, the verifier's
main cost). Both agree with RFC 8785 on every value except: floats written with an
exponent or as ``X.0`` (ES6 writes ``1e-7``, ``2``), integers of 16 digits or more
(RFC 8785 allows only I-JSON integers, |n| < 2**53), and strings or keys beyond the BMP
(RFC 8785 sorts keys by UTF-16 code units). Bytes with such a number token or any 4-byte
UTF-8 sequence go the slow way; both directions use the same test (:func:`_risky`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
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


def _scan(data: bytes) -> bool:
    if _INTEGRAL.search(data) or _EXP_LOWER.search(data) or _EXP_UPPER.search(data):
        return True
    mapped = data.translate(_DIGITS)
    return _LONG_INT in mapped or _LONG_NEG in mapped


def _risky(data: bytes) -> bool:
    """Whether ``data`` (JSON) may hold such a number token. Without an escaped quote,
    every '"' delimits a string, so the text between strings is numbers, punctuation and
    literals: any 'e' left there once true/false are gone is an exponent."""
    if b'\\"' in data:
        return _scan(data)
    between = b"".join(data.split(b'"')[::2]).replace(b"true", b"").replace(b"false", b"")
    return b"e" in between or b"E" in between or _scan(between)

_NON_BMP = re.compile(rb"[\xf0-\xff]")
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False, check_circular=False).encode

CanonicalizationError = rfc8785.CanonicalizationError


class Undecided(Exception):  # noqa: N818 - a signal, not an error
    """The fast path cannot tell: use ``rfc8785``."""


def loads(data: bytes) -> Any:
    """Parse UTF-8 bytes for :func:`same`, raising :class:`Undecided` when a number token
    may be one Python or orjson writes differently from ES6 (exponents, "2.0", 16+
    digits) or a character lies beyond the BMP: only ``rfc8785`` can judge those."""
    if _risky(data) or not (data.isascii() or not _NON_BMP.search(data)):
        raise Undecided
    return orjson.loads(data)


def encode(obj: Any) -> bytes:
    """Compact sorted bytes, unchecked: RFC 8785 for a value parsed by :func:`loads` from
    a line :func:`same` accepted (its numbers and characters were checked there)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


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


def same(data: bytes, obj: Any) -> bool | None:
    """True when ``data`` is exactly the RFC 8785 form of ``obj``, parsed from it by
    :func:`loads`; None when the fast encoder cannot tell (``rfc8785`` must judge, and
    rejects what is not canonical: duplicate keys, spaces, unsorted keys)."""
    try:
        return True if encode(obj) == data else None
    except (orjson.JSONEncodeError, RecursionError):
        return None
