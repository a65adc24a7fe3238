"""Signed, tamper-evident audit log of verdicts, verifiable offline.

Writing (the pipeline)::

    signer = load_signer(key_path, allow_dev_key=not policy.audit.require_signing_key,
                         dev_key_dir=log_path.parent)
    result = record_verdict(verdict, log_path, signer)   # AppendResult, durable on return
    envelope = make_attestation(verdict, signer, audit=result)   # DSSE / in-toto

Verifying (a security team, offline, trusting only public keys)::

    keys = read_public_keys([Path("audit-2025.pub")])
    result = get_verification_result(log_path, keys, trusted_checkpoints=[Path("cp.note")])
    verify_log(...)            # same, but raises LogTamperedError (a VerificationError)
    verify_attestation(envelope, keys)

Files: ``LOG`` (JSON lines: RFC 8785 records, see :mod:`.records`), ``LOG.checkpoints``
(C2SP signed-note tlog-checkpoints, one per commit, see :mod:`.checkpoint`), ``LOG.state``
(the newest head, see :mod:`.head`), ``LOG.torn`` (bytes cut off by crash repair),
``LOG.spool/`` (cross-process group commit, :mod:`.spool`), ``LOG.witness`` (witness
cosigned checkpoints, :mod:`.witness`). The Merkle tree is RFC 6962/9162 over the
record lines (:mod:`.merkle`). Keys are C2SP note keys (:mod:`.keys`). Formats and the
threat model are in ``FORMAT.md``; checking with standard tools in ``REVIEWER.md``.
"""

from __future__ import annotations

from .attest import make_attestation, verify_attestation
from .interface import (
    AppendResult,
    AuditLimits,
    AuditRepairWarning,
    StateWarning,
    TamperFinding,
    TamperKind,
    TornTail,
    VerificationResult,
)
from .keys import (
    DevelopmentKeyWarning,
    KeyFiles,
    PublicKey,
    Signer,
    generate_keys,
    load_signer,
    read_public_keys,
)
from .log import AuditLog, record_event, record_verdict
from .proofs import prove_consistency, prove_inclusion, verify_inclusion_bundle
from .verify import LogTamperedError, get_verification_result, verify_log
from .witness import Cosigner, WitnessRefused, read_witness_keys
from .witnessed import witness_log

__all__ = [
    "AppendResult", "AuditLimits", "AuditLog", "AuditRepairWarning", "Cosigner",
    "DevelopmentKeyWarning", "TamperFinding", "KeyFiles", "LogTamperedError", "PublicKey", "Signer",
    "StateWarning", "TamperKind", "TornTail", "VerificationResult", "WitnessRefused",
    "generate_keys", "get_verification_result", "load_signer", "make_attestation",
    "prove_consistency", "prove_inclusion", "read_public_keys", "read_witness_keys",
    "record_event", "record_verdict", "verify_attestation", "verify_inclusion_bundle", "verify_log",
    "witness_log",
]
