"""Ed25519 keys in the C2SP signed-note encodings (the ones Go's ``sumdb/note`` uses).

* private key file ``NAME.key`` (mode 0600): ``PRIVATE+KEY+<name>+<hash8>+<b64(0x01||seed)>``
* public key ``NAME.pub`` (C2SP vkey): ``<name>+<hash8>+<b64(0x01||pubkey)>``
* public key ``NAME.pub.pem``: SubjectPublicKeyInfo PEM, for ``openssl pkeyutl``

``hash8`` is the hex key hash: the first 4 bytes of SHA-256(name || 0x0A || 0x01 || pubkey).
The key id printed and put in DSSE envelopes is ``<name>+<hash8>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import InputError
from . import storage

ALG_ED25519 = 0x01
ENV_VAR = "SANDBOXHARNESS_SIGNING_KEY"
DEV_KEY_NAME = "sandboxharness-DEVELOPMENT-KEY-NOT-FOR-AUDIT"
_PRIVATE_PREFIX = "PRIVATE+KEY+"
_NAME_RE = re.compile(r"[!-*,-~]+")  # printable ASCII without space and '+'
_MAX_KEY_FILE = 16 << 10


class DevelopmentKeyWarning(UserWarning):
    """Emitted every time the automatically created development key is used."""


def key_hash(name: str, public_raw: bytes) -> bytes:
    """C2SP signed-note key hash for Ed25519: SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_raw).digest()[:4]


def valid_name(name: str) -> bool:
    return bool(_NAME_RE.fullmatch(name))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    raw = base64.b64decode(text, validate=True)
    if _b64(raw) != text:
        raise binascii.Error("non-canonical base64")
    return raw


@dataclass(frozen=True)
class PublicKey:
    """A trusted Ed25519 verification key. ``name`` is None for a PEM key: then the name
    comes from the signature line and is bound by the key hash."""

    raw: bytes
    name: str | None = None

    def key_hash(self, name: str | None = None) -> bytes:
        return key_hash(name or self.name or "", self.raw)

    def matches(self, name: str, hash4: bytes) -> bool:
        if self.name is not None and name != self.name:
            return False
        return key_hash(name, self.raw) == hash4

    @property
    def key_id(self) -> str:
        if self.name is None:
            return "ed25519:" + hashlib.sha256(self.raw).hexdigest()[:16]
        return f"{self.name}+{self.key_hash().hex()}"

    def verify(self, signature: bytes, message: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True

    def to_vkey(self) -> str:
        if self.name is None:
            raise ValueError("a PEM key has no name; a vkey needs one")
        return f"{self.name}+{self.key_hash().hex()}+{_b64(bytes([ALG_ED25519]) + self.raw)}"

    def to_pem(self) -> str:
        return Ed25519PublicKey.from_public_bytes(self.raw).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()


class Signer:
    """An Ed25519 signing key with its note name."""

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        if not valid_name(name):
            raise InputError(f"invalid key name {name!r}: printable ASCII, no spaces or '+'")
        self.name = name
        self._key = private_key
        raw = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public_key = PublicKey(raw=raw, name=name)

    @property
    def key_id(self) -> str:
        return self.public_key.key_id

    @property
    def is_development_key(self) -> bool:
        return "DEVELOPMENT-KEY-NOT-FOR-AUDIT" in self.name

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def derive_key(self, label: str) -> bytes:
        """A secret only holders of this signing key can compute (e.g. to authenticate
        writers to each other); never published, never written down."""
        seed = self._key.private_bytes(serialization.Encoding.Raw,
                                       serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())
        return hashlib.sha256(b"sandboxharness/derive/v1\n" + label.encode() + b"\n"
                              + seed).digest()

    def to_private_text(self) -> str:
        seed = self._key.private_bytes(serialization.Encoding.Raw,
                                       serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())
        return (f"{_PRIVATE_PREFIX}{self.name}+{self.public_key.key_hash().hex()}+"
                f"{_b64(bytes([ALG_ED25519]) + seed)}")

    def __repr__(self) -> str:  # never print key material
        return f"Signer({self.key_id!r})"


def parse_private_key(text: str, *, where: str) -> Signer:
    bad = InputError("not a sandboxharness signing key (expected one line "
                     "PRIVATE+KEY+<name>+<hash>+<base64>)", where=where)
    text = text.strip()
    if not text.startswith(_PRIVATE_PREFIX):
        raise bad
    parts = text[len(_PRIVATE_PREFIX):].split("+", 2)
    if len(parts) != 3 or not valid_name(parts[0]):
        raise bad
    name, hash_hex, data = parts
    try:
        raw = _unb64(data)
    except (binascii.Error, ValueError):
        raise bad from None
    if len(raw) != 33 or raw[0] != ALG_ED25519:
        raise bad
    signer = Signer(name, Ed25519PrivateKey.from_private_bytes(raw[1:]))
    if signer.public_key.key_hash().hex() != hash_hex:
        raise InputError("signing key is corrupt: its key hash does not match", where=where)
    return signer


def parse_public_key(text: str, *, where: str) -> PublicKey:
    """A C2SP vkey line or an Ed25519 SubjectPublicKeyInfo PEM."""
    text = text.strip()
    if text.startswith("-----BEGIN PUBLIC KEY-----"):
        try:
            key = serialization.load_pem_public_key(text.encode())
        except ValueError:
            raise InputError("malformed PEM public key", where=where) from None
        if not isinstance(key, Ed25519PublicKey):
            raise InputError("PEM public key is not Ed25519", where=where)
        return PublicKey(raw=key.public_bytes(serialization.Encoding.Raw,
                                              serialization.PublicFormat.Raw))
    if text.startswith(_PRIVATE_PREFIX):
        raise InputError("this is a PRIVATE key; pass the .pub file", where=where)
    parts = text.split("+", 2)
    bad = InputError("not a public key (expected a vkey line <name>+<hash>+<base64> "
                     "or an Ed25519 PEM)", where=where)
    if len(parts) != 3 or not valid_name(parts[0]):
        raise bad
    try:
        raw = _unb64(parts[2])
    except (binascii.Error, ValueError):
        raise bad from None
    if len(raw) != 33 or raw[0] != ALG_ED25519:
        raise bad
    public = PublicKey(raw=raw[1:], name=parts[0])
    if public.key_hash().hex() != parts[1]:
        raise InputError("public key is corrupt: its key hash does not match", where=where)
    return public


def read_public_keys(paths: list[Path]) -> list[PublicKey]:
    if not paths:
        raise InputError("at least one --public-key is required")
    return [parse_public_key(storage.read_text_file(p, _MAX_KEY_FILE, what="public key"),
                             where=str(p)) for p in paths]


@dataclass(frozen=True)
class KeyFiles:
    private: Path
    public: Path
    public_pem: Path
    key_id: str


def _write_key_files(signer: Signer, out_dir: Path) -> KeyFiles:
    out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = KeyFiles(private=out_dir / f"{signer.name}.key",
                     public=out_dir / f"{signer.name}.pub",
                     public_pem=out_dir / f"{signer.name}.pub.pem", key_id=signer.key_id)
    storage.create_exclusive(files.private, (signer.to_private_text() + "\n").encode(), 0o600)
    storage.create_exclusive(files.public, (signer.public_key.to_vkey() + "\n").encode(), 0o644)
    storage.create_exclusive(files.public_pem, signer.public_key.to_pem().encode(), 0o644)
    return files


def generate_keys(out_dir: Path, name: str) -> KeyFiles:
    """Create ``NAME.key`` (0600), ``NAME.pub`` and ``NAME.pub.pem``; never overwrites."""
    signer = Signer(name, Ed25519PrivateKey.generate())
    for suffix in (".key", ".pub", ".pub.pem"):
        if (out_dir / f"{name}{suffix}").exists():
            raise InputError("refusing to overwrite an existing key file",
                             where=str(out_dir / f"{name}{suffix}"))
    return _write_key_files(signer, out_dir)


def read_signer(path: Path) -> Signer:
    text = storage.read_text_file(path, _MAX_KEY_FILE, what="signing key")
    signer = parse_private_key(text, where=str(path))
    mode = path.stat().st_mode & 0o077
    if mode:
        warnings.warn(f"{path}: signing key is readable by group/others (mode "
                      f"{oct(path.stat().st_mode & 0o777)}); chmod 600 it", stacklevel=3)
    return signer


def _development_signer(dev_key_dir: Path) -> Signer:
    path = dev_key_dir / f"{DEV_KEY_NAME}.key"
    if not path.exists():
        try:
            _write_key_files(Signer(DEV_KEY_NAME, Ed25519PrivateKey.generate()), dev_key_dir)
        except InputError:
            pass  # another process created it first; read theirs below
    return read_signer(path)


def load_signer(path: Path | None, *, allow_dev_key: bool, dev_key_dir: Path) -> Signer:
    """The signing key, from (in order) ``path``, ``$SANDBOXHARNESS_SIGNING_KEY`` (a path, or
    the key itself when it starts with ``PRIVATE+KEY+``), else a development key in
    ``dev_key_dir`` - created on first use, named ``...DEVELOPMENT-KEY-NOT-FOR-AUDIT`` and
    warned about on every use - when ``allow_dev_key``; otherwise :class:`InputError`."""
    if path is not None:
        return read_signer(path)
    env = os.environ.get(ENV_VAR, "").strip()
    if env.startswith(_PRIVATE_PREFIX):
        return parse_private_key(env, where=f"${ENV_VAR}")
    if env:
        return read_signer(Path(env))
    if not allow_dev_key:
        raise InputError(f"no signing key: pass one or set ${ENV_VAR} (the policy forbids the "
                         "development key: audit.require_signing_key)")
    signer = _development_signer(dev_key_dir)
    warnings.warn(f"signing with the DEVELOPMENT key {signer.key_id} in {dev_key_dir}: "
                  "not for audit", DevelopmentKeyWarning, stacklevel=2)
    return signer
