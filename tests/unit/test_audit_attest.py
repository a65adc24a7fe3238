"""in-toto Statement v1 in a DSSE envelope, Ed25519 - checked by us and by openssl."""

from __future__ import annotations

import base64
import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from sandboxharness.audit import (
    Signer,
    get_verification_result,
    make_attestation,
    record_verdict,
    verify_attestation,
)
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.attest import PAYLOAD_TYPE, pae
from sandboxharness.errors import VerificationError

SIGNER = Signer("attest-test", Ed25519PrivateKey.generate())
KEYS = [SIGNER.public_key]


def _pae_by_hand(envelope: dict) -> bytes:
    """The DSSE v1 formula written out independently of the library."""
    payload = base64.b64decode(envelope["payload"])
    ptype = envelope["payloadType"].encode()
    return (b"DSSEv1 " + str(len(ptype)).encode() + b" " + ptype + b" "
            + str(len(payload)).encode() + b" " + payload)


def test_statement_shape() -> None:
    verdict = sample_verdict(1)
    env = make_attestation(verdict, SIGNER)
    assert env["payloadType"] == "application/vnd.in-toto+json"
    assert env["signatures"][0]["keyid"] == SIGNER.key_id
    st = verify_attestation(env, KEYS)
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://sandboxharness.dev/evaluation/v1"
    assert st["subject"] == [{"name": verdict.candidate.name,
                              "digest": {"sha256": verdict.candidate.sha256[7:]}}]
    pred = st["predicate"]
    assert pred["decision"] == "reject" and pred["reasons"][0]["code"] == "INCORRECT_NUMERICAL"
    assert pred["policy"]["sha256"] == verdict.policy.sha256
    assert pred["definition"]["sha256"] == verdict.definition.sha256
    assert pred["environment"]["device"] == "NVIDIA H200"
    assert pred["verdict_sha256"] == verdict.content_hash()


def test_signature_is_over_the_pae_formula() -> None:
    env = make_attestation(sample_verdict(2), SIGNER)
    key = load_pem_public_key(SIGNER.public_key.to_pem().encode())
    key.verify(base64.b64decode(env["signatures"][0]["sig"]), _pae_by_hand(env))  # type: ignore[union-attr,call-arg]


def _flip_payload(env: dict) -> None:
    st = json.loads(base64.b64decode(env["payload"]))
    st["predicate"]["decision"] = "promote"
    env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()


@pytest.mark.parametrize("attack", [
    _flip_payload,
    lambda e: e.update(payloadType="application/json"),
    lambda e: e["signatures"][0].update(sig=base64.b64encode(b"\0" * 64).decode()),
    lambda e: e.update(signatures=[]),
    lambda e: e.update(payload="%%%"),
    lambda e: e.pop("signatures"),
])
def test_tampered_attestation_rejected(attack: object) -> None:
    """Attack: upgrade a reject to promote, swap the type, forge or drop signatures."""
    env = make_attestation(sample_verdict(1), SIGNER)
    attack(env)  # type: ignore[operator]
    with pytest.raises(VerificationError):
        verify_attestation(env, KEYS)


def test_wrong_key_and_non_object_rejected() -> None:
    env = make_attestation(sample_verdict(1), SIGNER)
    other = Signer("attest-test", Ed25519PrivateKey.generate())
    with pytest.raises(VerificationError, match="trusted key"):
        verify_attestation(env, [other.public_key])
    with pytest.raises(VerificationError):
        verify_attestation([env], KEYS)
    other_kind = copy.deepcopy(env)  # validly signed, but not our kind of statement
    other_kind["payload"] = base64.b64encode(b'{"_type":"x"}').decode()
    sig = SIGNER.sign(pae(PAYLOAD_TYPE, b'{"_type":"x"}'))
    other_kind["signatures"] = [{"keyid": "k", "sig": base64.b64encode(sig).decode()}]
    with pytest.raises(VerificationError, match="Statement"):
        verify_attestation(other_kind, KEYS)


def test_attestation_carries_a_trusted_checkpoint(tmp_path: Path) -> None:
    """Each attestation embeds the log checkpoint right after its verdict was logged, so
    whoever keeps attestations holds anchors that catch truncation and rollback."""
    log = tmp_path / "audit.log"
    for i in range(3):
        record_verdict(sample_verdict(i), log, SIGNER)
    appended = record_verdict(sample_verdict(3), log, SIGNER)
    st = verify_attestation(make_attestation(sample_verdict(3), SIGNER, audit=appended), KEYS)
    anchor = st["predicate"]["audit_log"]
    assert anchor["index"] == 3 and anchor["leaf_hash"] == appended.leaf_hash
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:3]))
    cps = log.with_name("audit.log.checkpoints")
    cps.write_text(cps.read_text()[: cps.read_text().index(anchor["checkpoint"])])
    assert get_verification_result(log, KEYS).ok  # shortened consistently...
    result = get_verification_result(log, KEYS, [anchor["checkpoint"]])
    assert not result.ok and result.first and result.first.kind.value == "rollback"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not on PATH")
def test_openssl_verifies_the_attestation(tmp_path: Path) -> None:
    """The reviewer path: openssl pkeyutl -verify -rawin over the PAE, PEM public key."""
    env = make_attestation(sample_verdict(5), SIGNER)
    (tmp_path / "pub.pem").write_text(SIGNER.public_key.to_pem())
    (tmp_path / "pae.bin").write_bytes(_pae_by_hand(env))
    (tmp_path / "sig.bin").write_bytes(base64.b64decode(env["signatures"][0]["sig"]))
    argv = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "pub.pem", "-rawin",
            "-in", "pae.bin", "-sigfile", "sig.bin"]
    ok = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and "Signature Verified Successfully" in ok.stdout
    (tmp_path / "pae.bin").write_bytes(_pae_by_hand(env).replace(b"reject", b"promot"))
    bad = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0
