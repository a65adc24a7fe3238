"""Glue between ``evaluate`` and the audit package: checks before, records after."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..models import Verdict

if TYPE_CHECKING:
    from ..audit import Signer


def _require_key(policy_path: Path | None) -> bool:
    if policy_path is None:
        return False
    from ..intake import load_policy

    return load_policy(policy_path).audit.require_signing_key


def load_signer_first(log: Path | None, key: Path | None, attestation: Path | None,
                      policy_path: Path | None) -> Signer | None:
    """Fail on bad audit arguments *before* spending minutes on an evaluation: the signer is
    loaded (and a development key created, where allowed) up front, so a bad key never costs
    an evaluation and the key already exists when the sandbox is told what to hide."""
    if attestation is not None and not attestation.parent.is_dir():
        raise InputError("directory does not exist", where=str(attestation.parent))
    if log is not None and not log.parent.is_dir():
        raise InputError("directory does not exist", where=str(log.parent))
    if log is None and attestation is None:
        return None
    if key is None and _require_key(policy_path):
        raise InputError("the policy requires --signing-key (no development key allowed)",
                         where=str(policy_path))
    if key is not None and not key.is_file():
        raise InputError("signing key not found", where=str(key))
    from .. import audit

    return audit.load_signer(key, allow_dev_key=not _require_key(policy_path),
                             dev_key_dir=(log or attestation or Path(".")).resolve().parent)


def record(verdict: Verdict, log: Path | None, attestation: Path | None,
           signer: Signer | None) -> None:
    if signer is None:
        return
    from .. import audit

    appended = audit.record_verdict(verdict, log, signer) if log is not None else None
    if attestation is not None:
        import json

        from .output import write_atomic

        envelope = audit.make_attestation(verdict, signer, audit=appended)
        write_atomic(attestation, json.dumps(envelope, indent=2))


def secret_paths(log: Path | None, key: Path | None) -> list[Path]:
    """Files the sandbox must hide: the log and its sidecars, signing keys beside them."""
    import os

    paths: list[Path] = []
    if log is not None:
        paths += [log, *log.parent.glob(log.name + ".*"), *log.parent.glob("*.key")]
    if key is not None:
        paths.append(key)
    env_key = os.environ.get("SANDBOXHARNESS_SIGNING_KEY", "")
    if env_key and not env_key.startswith("PRIVATE+KEY+") and Path(env_key).is_file():
        paths.append(Path(env_key))
    return [p.resolve() for p in paths if p.exists()]
