"""Verdicts in the archive: each stored as its canonical JSON (RFC 8785), so its object's name
is the ``verdict_sha256`` an audit record carries, plus a small ref under
``refs/verdicts/<hex>.json`` (candidate, definition, decision, when) for finding it by a
hash prefix. Refs are an index, not evidence: what counts is the object and the signed log.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..models import Verdict, canonical_json
from .store import HASH, TMP, Archive, ArchiveError, ArchiveIntegrityError, digest_of, parse_hash

REFS = Path("refs") / "verdicts"
_PREFIX = re.compile(r"^(sha256:)?[0-9a-f]{8,64}$")


def verdict_bytes(verdict: Verdict) -> bytes:
    """The bytes the audit log hashes into ``verdict_sha256``."""
    return canonical_json(verdict.model_dump(mode="json"))


def put_verdict(archive: Archive, verdict: Verdict) -> str:
    digest = archive.put(verdict_bytes(verdict))
    ref = {"verdict": digest, "candidate": verdict.candidate.name,
           "definition": verdict.definition.name, "decision": verdict.decision,
           "artifacts": len(verdict.artifacts),
           "archived_at": datetime.now(UTC).isoformat(timespec="seconds")}
    _write_ref(archive, digest, json.dumps(ref, sort_keys=True) + "\n")
    return digest


def _ref_path(archive: Archive, digest: str) -> Path:
    return archive.root / REFS / (parse_hash(digest).removeprefix("sha256:") + ".json")


def _write_ref(archive: Archive, digest: str, text: str) -> None:
    path = _ref_path(archive, digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=archive.root / TMP, prefix="ref-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot write ({exc.strerror})") from None


def load_verdict(archive: Archive, digest: str) -> Verdict:
    """The archived verdict, re-hashed; an object that is not a verdict is bad input."""
    data = archive.get(digest)
    try:
        return Verdict.model_validate(json.loads(data))
    except ValueError as exc:
        raise ArchiveIntegrityError(f"{digest}: not a verdict "
                                    f"({str(exc).splitlines()[0][:200]})") from None


def verdict_refs(archive: Archive) -> list[str]:
    """Hashes of the verdicts this archive holds refs for."""
    folder = archive.root / REFS
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.iterdir()):
        tag = "sha256:" + p.name.removesuffix(".json")
        if p.name.endswith(".json") and HASH.match(tag):
            out.append(tag)
    return out


def ref_info(archive: Archive, digest: str) -> dict[str, Any] | None:
    try:
        info = json.loads(_ref_path(archive, digest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def remove_ref(archive: Archive, digest: str) -> None:
    _ref_path(archive, digest).unlink(missing_ok=True)


def resolve_verdict(archive: Archive, text: str) -> str:
    """A verdict named by its hash, a unique hash prefix (8+ hex), or a verdict JSON file
    (``evaluate --json`` output): its hash."""
    if _PREFIX.match(text):
        want = text.removeprefix("sha256:")
        found = [d for d in verdict_refs(archive) if d.removeprefix("sha256:").startswith(want)]
        if len(want) == 64:
            return "sha256:" + want
        if len(found) == 1:
            return found[0]
        raise InputError("no archived verdict has this hash prefix" if not found else
                         f"{len(found)} archived verdicts share this prefix", where=text)
    path = Path(text)
    if not path.is_file():
        raise InputError("neither a verdict hash nor a verdict JSON file", where=text[:200])
    try:
        verdict = Verdict.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise InputError(f"not a verdict ({str(exc).splitlines()[0][:200]})",
                         where=text) from None
    return digest_of(verdict_bytes(verdict))
