"""Audit records: one verdict each, RFC 8785 canonical JSON, one per log line.

Record fields (all required)::

    schema             "https://sandboxharness.dev/audit/record/v1"
    index              0-based position in the log
    prev               "sha256:<hex>" leaf hash of record index-1 (64 zeros for index 0)
    recorded_at        UTC time of the append, RFC 3339 with "Z"
    harness_version    version of the harness that wrote the record
    decision           "promote" | "reject" (copied from the verdict)
    candidate_sha256, definition_sha256, policy_sha256, seed  (copied from the verdict)
    environment_sha256 "sha256:<hex>" of the canonical verdict.environment
    verdict_sha256     "sha256:<hex>" of the canonical verdict
    verdict            the verdict, ``Verdict.model_dump(mode="json")``

The line's bytes are exactly the canonical JSON; its Merkle leaf hash is
SHA-256(0x00 || line without the newline).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from datetime import datetime
from typing import Any

import rfc8785

from ..errors import AuditError
from ..models import Verdict
from ..models._base import sha256_tag
from .interface import FormatError

SCHEMA = "https://sandboxharness.dev/audit/record/v1"
GENESIS_PREV = "sha256:" + "0" * 64
_FIELDS = {"schema", "index", "prev", "recorded_at", "harness_version", "decision",
           "candidate_sha256", "definition_sha256", "policy_sha256", "seed",
           "environment_sha256", "verdict_sha256", "verdict"}


def harness_version() -> str:
    try:
        return importlib.metadata.version("sandboxharness")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _canonical(obj: Any) -> bytes:
    try:
        return rfc8785.dumps(obj)
    except rfc8785.CanonicalizationError as exc:
        raise AuditError(f"verdict cannot be written as canonical JSON (RFC 8785): {exc}") from None


def leaf_tag(leaf_hash: bytes) -> str:
    return "sha256:" + leaf_hash.hex()


def build_record(verdict: Verdict, *, index: int, prev_leaf: bytes | None,
                 recorded_at: datetime) -> dict[str, Any]:
    body = verdict.model_dump(mode="json")
    return {
        "schema": SCHEMA,
        "index": index,
        "prev": GENESIS_PREV if prev_leaf is None else leaf_tag(prev_leaf),
        "recorded_at": recorded_at.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "harness_version": harness_version(),
        "decision": verdict.decision,
        "candidate_sha256": verdict.candidate.sha256,
        "definition_sha256": verdict.definition.sha256,
        "policy_sha256": verdict.policy.sha256,
        "seed": verdict.seed,
        "environment_sha256": sha256_tag(_canonical(body["environment"])),
        "verdict_sha256": sha256_tag(_canonical(body)),
        "verdict": body,
    }


def encode_record(record: dict[str, Any]) -> bytes:
    data = _canonical(record)
    if b"\n" in data:  # cannot happen with RFC 8785 (newlines are escaped); belt and braces
        raise AuditError("canonical record contains a newline")
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise FormatError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise FormatError(f"non-JSON number {name}")


def _canonical_int(literal: str) -> int | float:
    value = int(literal)
    if str(value) != literal:
        raise FormatError(f"integer {literal[:30]} is not canonical RFC 8785")
    if abs(value) <= _MAX_SAFE_INT:
        return value
    return _canonical_float(literal)  # e.g. 2**53 as a float is written without ".0"


def _canonical_float(literal: str) -> float:
    value = float(literal)
    try:
        ok = rfc8785.dumps(value) == literal.encode()
    except rfc8785.CanonicalizationError:
        ok = False
    if not ok:
        raise FormatError(f"number {literal[:30]} is not in canonical (ES6) form")
    return value


_MAX_SAFE_INT = 2**53 - 1
_NON_BMP = re.compile(rb"[\xf0-\xff]")


def _fast_canonical(obj: Any) -> bytes | None:
    """RFC 8785 bytes via the C JSON encoder, valid when numbers were already checked to be
    canonical and no key or string leaves the BMP (code point order = UTF-16 order)."""
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode()
    except (UnicodeEncodeError, ValueError):
        return None


def parse_record(line: bytes) -> tuple[dict[str, Any], bytes]:
    """Parse one log line; it must be a canonical, well-formed record. Also returns the
    canonical bytes of its verdict (computed once, reused for ``verdict_sha256``)."""
    try:
        obj = json.loads(line, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                         parse_int=_canonical_int, parse_float=_canonical_float)
    except FormatError:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, oversized integers
        raise FormatError(f"not valid JSON ({exc.__class__.__name__})") from None
    except RecursionError:
        raise FormatError("JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise FormatError("not a JSON object")
    if set(obj) != _FIELDS:
        missing, extra = sorted(_FIELDS - set(obj)), sorted(set(obj) - _FIELDS)
        raise FormatError(f"wrong fields (missing {missing}, unexpected {extra})")
    if obj["schema"] != SCHEMA:
        raise FormatError(f"unknown schema {str(obj['schema'])[:80]!r}")
    if type(obj["index"]) is not int or obj["index"] < 0:
        raise FormatError("index is not a non-negative integer")
    if not isinstance(obj["prev"], str) or len(obj["prev"]) != 71 \
            or not obj["prev"].startswith("sha256:"):
        raise FormatError("prev is not a sha256:<hex> hash")
    if not isinstance(obj["verdict"], dict):
        raise FormatError("verdict is not an object")
    if not _NON_BMP.search(line) and _fast_canonical(obj) == line:
        verdict_bytes = _fast_canonical(obj["verdict"])
        if verdict_bytes is not None:
            return obj, verdict_bytes
    try:  # the general path: RFC 8785 of an object with ASCII keys, sorted "key":value pairs
        verdict = rfc8785.dumps(obj["verdict"])
        canonical = b"{" + b",".join(
            rfc8785.dumps(k) + b":" + (verdict if k == "verdict" else rfc8785.dumps(obj[k]))
            for k in sorted(obj)) + b"}"
    except rfc8785.CanonicalizationError:
        raise FormatError("holds values RFC 8785 cannot encode") from None
    if canonical != line:
        raise FormatError("bytes are not the canonical (RFC 8785) form of the record")
    return obj, verdict


def decode_record(line: bytes) -> dict[str, Any]:
    return parse_record(line)[0]


_FIRST_KEY = b'{"candidate_sha256":"sha256:'


def is_torn_record(data: bytes) -> bool:
    """Whether ``data`` (an incomplete last line) can be the start of a record line: what
    a writer that died mid-``write`` leaves. Canonical JSON sorts keys, so every record
    line starts with the same bytes."""
    head = data[:len(_FIRST_KEY)]
    return _FIRST_KEY.startswith(head) and b"\n" not in data


def summary_mismatches(record: dict[str, Any], verdict_bytes: bytes | None = None) -> list[str]:
    """Summary fields that disagree with the embedded verdict (empty when consistent)."""
    v = record["verdict"]
    expect = {
        "decision": v.get("decision"),
        "candidate_sha256": (v.get("candidate") or {}).get("sha256"),
        "definition_sha256": (v.get("definition") or {}).get("sha256"),
        "policy_sha256": (v.get("policy") or {}).get("sha256"),
        "seed": v.get("seed"),
    }
    bad = [k for k, want in expect.items() if record[k] != want]
    try:
        if record["environment_sha256"] != sha256_tag(rfc8785.dumps(v.get("environment"))):
            bad.append("environment_sha256")
        if record["verdict_sha256"] != sha256_tag(verdict_bytes or rfc8785.dumps(v)):
            bad.append("verdict_sha256")
    except rfc8785.CanonicalizationError:
        bad.append("verdict")
    return bad


def verdict_schema_problem(record: dict[str, Any]) -> str | None:
    """Whether the verdict still validates against today's model (schema drift, not tamper)."""
    try:
        Verdict.model_validate(record["verdict"])
    except ValueError as exc:
        return str(exc).splitlines()[0]
    return None
