"""in-toto Statement v1 about a verdict, in a DSSE envelope signed with Ed25519.

Payload: the RFC 8785 canonical JSON of the statement. Signature: Ed25519 over
``PAE(payloadType, payload)`` = ``"DSSEv1" SP len(type) SP type SP len(payload) SP payload``
(lengths in ASCII decimal). See ``REVIEWER.md`` for checking one with openssl.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from ..errors import AuditError, VerificationError
from ..models import Verdict
from ..models._base import sha256_tag
from .interface import AppendResult
from .keys import PublicKey, Signer
from .records import canonical

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://sandboxharness.dev/evaluation/v1"
_MAX_SIGNATURES = 16


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _hex_digest(tag: str) -> str:
    hex_part = tag.removeprefix("sha256:")
    if len(hex_part) != 64 or any(c not in "0123456789abcdef" for c in hex_part):
        raise AuditError(f"candidate digest is not sha256:<hex>: {tag[:80]!r}")
    return hex_part


def make_statement(verdict: Verdict, audit: AppendResult | None = None) -> dict[str, Any]:
    body = verdict.model_dump(mode="json")
    predicate: dict[str, Any] = {
        "decision": body["decision"],
        "reasons": body["reasons"],
        "candidate": body["candidate"],
        "definition": body["definition"],
        "policy": body["policy"],
        "seed": body["seed"],
        "environment": body["environment"],
        "stages": [{"stage": s["stage"], "status": s["status"],
                    "reasons": [r["code"] for r in s["reasons"]]} for s in body["stages"]],
        "started_at": body["started_at"],
        "finished_at": body["finished_at"],
        "verdict_sha256": sha256_tag(canonical(body)),
    }
    if audit is not None:
        predicate["audit_log"] = {"origin": audit.origin, "index": audit.index,
                                  "leaf_hash": audit.leaf_hash,
                                  "checkpoint": audit.checkpoint_text}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": verdict.candidate.name,
                     "digest": {"sha256": _hex_digest(verdict.candidate.sha256)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def make_attestation(verdict: Verdict, signer: Signer, *,
                     audit: AppendResult | None = None) -> dict[str, Any]:
    """A DSSE envelope (JSON-ready dict) around an in-toto statement about ``verdict``.
    Pass the :class:`AppendResult` of the audit append to bind the attestation to the log
    (its signed checkpoint then doubles as a trusted checkpoint for ``audit verify``)."""
    payload = canonical(make_statement(verdict, audit))
    sig = signer.sign(pae(PAYLOAD_TYPE, payload))
    return {"payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode(),
            "signatures": [{"keyid": signer.key_id, "sig": base64.b64encode(sig).decode()}]}


def _b64decode(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise VerificationError(f"attestation {what} is not a string")
    try:  # DSSE allows standard or URL-safe base64
        alt = value.replace("-", "+").replace("_", "/")
        return base64.b64decode(alt + "=" * (-len(alt) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise VerificationError(f"attestation {what} is not base64") from None


def verify_attestation(envelope: Any, public_keys: Sequence[PublicKey]) -> dict[str, Any]:
    """Check a DSSE envelope: at least one signature by a trusted key over the PAE, an
    in-toto Statement v1 with our predicate type. Returns the statement; raises
    :class:`VerificationError` otherwise."""
    if not isinstance(envelope, dict):
        raise VerificationError("attestation is not a JSON object")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise VerificationError(f"attestation payloadType is not {PAYLOAD_TYPE}")
    payload = _b64decode(envelope.get("payload"), "payload")
    sigs = envelope.get("signatures")
    if not isinstance(sigs, list) or not sigs or len(sigs) > _MAX_SIGNATURES:
        raise VerificationError("attestation has no (or too many) signatures")
    message = pae(PAYLOAD_TYPE, payload)
    trusted = False
    for entry in sigs:
        if not isinstance(entry, dict):
            raise VerificationError("attestation signature entry is not an object")
        sig = _b64decode(entry.get("sig"), "signature")
        if any(key.verify(sig, message) for key in public_keys):
            trusted = True
    if not trusted:
        raise VerificationError("attestation has no valid signature by a trusted key")
    try:
        statement = json.loads(payload)
    except ValueError:
        raise VerificationError("attestation payload is not JSON") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise VerificationError(f"attestation payload is not an {STATEMENT_TYPE}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise VerificationError(f"attestation predicateType is not {PREDICATE_TYPE}")
    subject = statement.get("subject")
    if not isinstance(subject, list) or not subject or not all(
            isinstance(s, dict) and isinstance(s.get("digest"), dict) for s in subject):
        raise VerificationError("attestation subject is malformed")
    return statement
