"""One verdict's bundle for a reviewer: the verdict, every artifact it names, a manifest.

Every object is re-hashed as it is read (a changed byte stops the export: a bundle never holds
what the archive no longer vouches for), and every file is created new under the output
folder, never through a link and never outside it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import InputError
from .refs import load_verdict
from .store import Archive, ArchiveError


@dataclass(frozen=True)
class Bundle:
    out: Path
    verdict: str
    files: int
    bytes: int


def _write_new(root: Path, name: str, data: bytes) -> None:
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts:  # the model refuses these; never trust twice
        raise ArchiveError(f"unsafe artifact name {name!r}")
    target = root.joinpath(*rel.parts)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(root.resolve()):
            raise ArchiveError(f"artifact {name!r} would leave the bundle folder")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise ArchiveError(f"{target}: cannot write ({exc.strerror})") from None


def export_bundle(archive: Archive, verdict_hash: str, out: Path) -> Bundle:
    """Write ``out/verdict.json``, ``out/artifacts/<name>`` and ``out/manifest.json``.
    ``out`` must not exist yet or be an empty folder."""
    if out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        raise InputError("the bundle folder must be new or empty", where=str(out))
    if not out.parent.is_dir():
        raise InputError("directory does not exist", where=str(out.parent))
    verdict = load_verdict(archive, verdict_hash)  # re-hashed: it is the one the log names
    contents = {name: archive.get(digest) for name, digest in verdict.artifacts.items()}
    out.mkdir(exist_ok=True)
    _write_new(out, "verdict.json", archive.get(verdict_hash))
    for name, data in contents.items():
        _write_new(out, f"artifacts/{name}", data)
    manifest = {"verdict": verdict_hash, "candidate": verdict.candidate.name,
                "definition": verdict.definition.name, "decision": verdict.decision,
                "artifacts": {name: {"sha256": verdict.artifacts[name], "bytes": len(data)}
                              for name, data in sorted(contents.items())},
                "check": "sha256sum each file; verdict.json's hash is the audit record's "
                         "verdict_sha256 (`sandboxharness audit show`, `audit prove`)"}
    _write_new(out, "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return Bundle(out, verdict_hash, len(contents) + 2, sum(map(len, contents.values())))
