"""Keys (C2SP note encodings), signed notes and checkpoints - real Ed25519 throughout."""

from __future__ import annotations

import base64
import hashlib
import stat
import warnings
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sandboxharness.audit import keys as K
from sandboxharness.audit.checkpoint import (
    Checkpoint,
    parse_body,
    parse_signed_checkpoint,
    sign_checkpoint,
    split_sidecar,
)
from sandboxharness.audit.interface import FormatError
from sandboxharness.audit.note import SignatureMismatch, parse_note, sign_note, verified_keys
from sandboxharness.errors import InputError

# Known answer from golang.org/x/mod/sumdb/note's package documentation (the reference
# implementation of C2SP signed notes). Ed25519 is deterministic, so we must match exactly.
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_NOTE = GO_TEXT + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1F" \
    "FYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"


def test_go_reference_note_byte_for_byte() -> None:
    signer = K.parse_private_key(GO_SKEY, where="go")
    assert signer.public_key.to_vkey() == GO_VKEY
    assert signer.to_private_text() == GO_SKEY
    assert sign_note(GO_TEXT, [signer]) == GO_NOTE
    pub = K.parse_public_key(GO_VKEY, where="go")
    assert verified_keys(parse_note(GO_NOTE), [pub]) == ["PeterNeumann+c74f20a3"]


def test_key_hash_is_the_c2sp_formula() -> None:
    raw = K.parse_public_key(GO_VKEY, where="go").raw
    want = hashlib.sha256(b"PeterNeumann\n\x01" + raw).digest()[:4]
    assert K.key_hash("PeterNeumann", raw) == want == bytes.fromhex("c74f20a3")


def test_generate_writes_three_files_private_0600(tmp_path: Path) -> None:
    files = K.generate_keys(tmp_path / "k", "audit-2025")
    assert stat.S_IMODE(files.private.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o700
    signer = K.read_signer(files.private)
    vkey = K.parse_public_key(files.public.read_text(), where="pub")
    pem = K.parse_public_key(files.public_pem.read_text(), where="pem")
    assert vkey.raw == pem.raw == signer.public_key.raw
    assert files.key_id == vkey.key_id == signer.key_id
    with pytest.raises(InputError, match="overwrite"):
        K.generate_keys(tmp_path / "k", "audit-2025")


@pytest.mark.parametrize("content,msg", [
    ("", "not a sandboxharness signing key"),
    ("hello", "not a sandboxharness signing key"),
    (GO_VKEY, "not a sandboxharness signing key"),
    (GO_SKEY.replace("c74f20a3", "c74f20a4"), "key hash does not match"),
    (GO_SKEY[:-4], "not a sandboxharness signing key"),
    ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----",
     "not a sandboxharness signing key"),
])
def test_bad_signing_key_files(tmp_path: Path, content: str, msg: str) -> None:
    path = tmp_path / "bad.key"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(InputError, match=msg) as exc:
        K.load_signer(path, allow_dev_key=True, dev_key_dir=tmp_path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_missing_unreadable_and_binary_key(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        K.load_signer(tmp_path / "nope.key", allow_dev_key=True, dev_key_dir=tmp_path)
    with pytest.raises(InputError, match="directory"):
        K.load_signer(tmp_path, allow_dev_key=True, dev_key_dir=tmp_path)
    (tmp_path / "bin.key").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="UTF-8"):
        K.load_signer(tmp_path / "bin.key", allow_dev_key=True, dev_key_dir=tmp_path)


def test_group_readable_key_warns(tmp_path: Path) -> None:
    files = K.generate_keys(tmp_path, "loose")
    files.private.chmod(0o644)
    with pytest.warns(UserWarning, match="chmod 600"):
        K.read_signer(files.private)


def test_env_var_path_or_inline_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = K.generate_keys(tmp_path, "from-env")
    monkeypatch.setenv(K.ENV_VAR, str(files.private))
    assert K.load_signer(None, allow_dev_key=False, dev_key_dir=tmp_path).name == "from-env"
    monkeypatch.setenv(K.ENV_VAR, files.private.read_text())
    assert K.load_signer(None, allow_dev_key=False, dev_key_dir=tmp_path).name == "from-env"
    monkeypatch.setenv(K.ENV_VAR, str(tmp_path / "missing.key"))
    with pytest.raises(InputError, match="not found"):
        K.load_signer(None, allow_dev_key=True, dev_key_dir=tmp_path)


def test_development_key_is_labelled_persistent_and_warned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(K.ENV_VAR, raising=False)
    with pytest.raises(InputError, match="require_signing_key"):
        K.load_signer(None, allow_dev_key=False, dev_key_dir=tmp_path)
    assert not list(tmp_path.iterdir())
    with pytest.warns(K.DevelopmentKeyWarning, match="DEVELOPMENT"):
        first = K.load_signer(None, allow_dev_key=True, dev_key_dir=tmp_path)
    assert "DEVELOPMENT-KEY-NOT-FOR-AUDIT" in first.name and first.is_development_key
    with pytest.warns(K.DevelopmentKeyWarning):
        again = K.load_signer(None, allow_dev_key=True, dev_key_dir=tmp_path)
    assert again.key_id == first.key_id
    assert stat.S_IMODE((tmp_path / f"{K.DEV_KEY_NAME}.key").stat().st_mode) == 0o600


def test_signer_repr_hides_the_key() -> None:
    signer = K.parse_private_key(GO_SKEY, where="go")
    assert "AYEK" not in repr(signer) and "PRIVATE" not in repr(signer)


@pytest.mark.parametrize("mutate", [
    lambda n: n.replace("problem,", "problem;"),           # text edited
    lambda n: n.replace("BwJnAM=", "BwJnAA="),              # signature edited
])
def test_altered_note_fails_for_a_trusted_key(mutate: object) -> None:
    pub = K.parse_public_key(GO_VKEY, where="go")
    with pytest.raises(SignatureMismatch):
        verified_keys(parse_note(mutate(GO_NOTE)), [pub])  # type: ignore[operator]


def test_unknown_keys_are_ignored_not_trusted() -> None:
    other = K.Signer("other", Ed25519PrivateKey.generate())
    note = parse_note(sign_note(GO_TEXT, [other]))
    assert verified_keys(note, [K.parse_public_key(GO_VKEY, where="go")]) == []
    # a signature line that claims the trusted name but with another key's hash is unknown
    forged = GO_NOTE.replace("PeterNeumann x08", "PeterNeumann y08")
    assert verified_keys(parse_note(forged), [K.parse_public_key(GO_VKEY, where="go")]) == []


@pytest.mark.parametrize("bad", [
    "", "no newline", "text\n", "text\n\n", "text\n\n- name c2ln\n", "text\n\n\u2014 na me x\n",
    "text\n\n\u2014 name !!!\n", "\ntext\n\n\u2014 name AAAAAAAA\n", "a\x01b\n\n\u2014 n AAAAAAA=\n",
])
def test_malformed_notes_rejected(bad: str) -> None:
    with pytest.raises(FormatError):
        parse_note(bad)


def test_checkpoint_roundtrip_and_strict_body() -> None:
    signer = K.Signer("log-key", Ed25519PrivateKey.generate())
    cp = Checkpoint("example.com/log", 42, b"\x07" * 32)
    text = sign_checkpoint(cp, signer)
    assert text.startswith("example.com/log\n42\nBwcH")
    assert parse_signed_checkpoint(text).checkpoint == cp
    root = base64.b64encode(b"\x07" * 32).decode()
    for body in (f"o\n042\n{root}\n", f"o\n-1\n{root}\n", f"o\n1\n{root[:-1]}\n",
                 "o\n1\nAAAA\n", f"\n1\n{root}\n", f"o o\n1\n{root}\n", f"o\n1\n{root}\n\n",
                 f"o\n{1 << 64}\n{root}\n"):
        with pytest.raises(FormatError):
            parse_body(body)


def test_sidecar_split_complete_torn_and_garbage() -> None:
    signer = K.Signer("k", Ed25519PrivateKey.generate())
    notes = [sign_checkpoint(Checkpoint("o", i, bytes([i]) * 32), signer) for i in range(1, 4)]
    data = "".join(n + "\n" for n in notes).encode()
    side = split_sidecar(data)
    assert [e.text for e in side.entries] == notes and side.torn_bytes == 0
    for cut in range(1, len(notes[-1].encode()) + 1):  # every torn write of the last entry
        torn = split_sidecar(data[:-cut])
        assert len(torn.entries) == 2 and torn.torn_bytes == len(notes[-1].encode()) + 1 - cut
    garbage = split_sidecar(data + b"o\n4\nxx\n\nnot a signature\n\n")
    assert len(garbage.entries) == 4 and garbage.entries[-1].text is None


def test_key_rotation_old_checkpoints_need_old_key() -> None:
    old = K.Signer("audit-2024", Ed25519PrivateKey.generate())
    new = K.Signer("audit-2025", Ed25519PrivateKey.generate())
    note_old = parse_note(sign_checkpoint(Checkpoint("o", 1, b"\x01" * 32), old))
    assert verified_keys(note_old, [new.public_key]) == []
    assert verified_keys(note_old, [new.public_key, old.public_key]) == [old.key_id]


def test_pem_key_matches_any_name_bound_by_hash() -> None:
    signer = K.Signer("named", Ed25519PrivateKey.generate())
    pem = K.parse_public_key(signer.public_key.to_pem(), where="pem")
    assert pem.name is None
    note = parse_note(sign_note("hello\n", [signer]))
    assert verified_keys(note, [pem]) == [signer.key_id]


def test_no_warning_for_a_0600_key(tmp_path: Path) -> None:
    files = K.generate_keys(tmp_path, "tight")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        K.read_signer(files.private)
