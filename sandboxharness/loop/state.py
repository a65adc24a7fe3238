"""A campaign's state: ``DIR/state.json``, an append-only, hash-chained history.

Every fact (the campaign's set-up, the baseline, each round's start and verdict, supervisor
events, resumptions) is one entry: ``{seq, kind, body, prev, hash}`` where ``hash`` is the
sha256 of the canonical JSON of the other four and ``prev`` the previous entry's hash. The
file is rewritten whole and atomically (temporary file, fsync, rename, fsync of the folder), so
a kill leaves either the old or the new history, never half of one. On load the chain is
verified: an edited, reordered, truncated-in-the-middle or corrupt file is bad input (one
line, exit 2), never silently repaired. Solutions the state refers to are stored
content-addressed beside it (``DIR/solutions/<hash>.json``) and checked when read back.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..models import Solution
from ..models._base import canonical_json, sha256_tag

__all__ = ["FORMAT", "CampaignState", "candidate_key"]

FORMAT = "sandboxharness-campaign-state/1"
GENESIS = "sha256:" + "0" * 64
MAX_STATE_BYTES = 256 * 1024 * 1024
KINDS = frozenset({"campaign", "baseline", "round_started", "round", "event", "resumed"})


def candidate_key(solution: Solution) -> str:
    """What makes two candidates the same kernel: language, build spec and sources (name,
    author and description do not count)."""
    body = solution.model_dump(mode="json", include={"spec", "sources"})
    return sha256_tag(canonical_json(body))


def _entry_hash(seq: int, kind: str, body: Any, prev: str) -> str:
    return sha256_tag(canonical_json({"seq": seq, "kind": kind, "body": body, "prev": prev}))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


class CampaignState:
    """The history of one campaign, in memory and on disk."""

    def __init__(self, root: Path, entries: list[dict[str, Any]]) -> None:
        self.root = root
        self.entries = entries

    @property
    def path(self) -> Path:
        return self.root / "state.json"

    @property
    def head(self) -> str:
        return str(self.entries[-1]["hash"]) if self.entries else GENESIS

    # --- reading ---------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path) -> CampaignState:
        """The state in ``root`` (an empty history if there is no state.json yet)."""
        if root.exists() and not root.is_dir():
            raise InputError("not a directory", where=str(root))
        path = root / "state.json"
        if not path.exists():
            return cls(root, [])
        if path.is_symlink() or not path.is_file():
            raise InputError("state.json must be a regular file", where=str(path))
        if path.stat().st_size > MAX_STATE_BYTES:
            raise InputError(f"larger than {MAX_STATE_BYTES} bytes", where=str(path))
        try:
            doc = json.loads(path.read_bytes())
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not JSON ({type(exc).__name__}): the state is corrupt",
                             where=str(path)) from None
        return cls(root, verify(doc, str(path)))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e["body"] for e in self.entries if e["kind"] == kind]

    def last(self, kind: str) -> dict[str, Any] | None:
        found = self.of_kind(kind)
        return found[-1] if found else None

    # --- writing ---------------------------------------------------------------------------
    def append(self, kind: str, body: dict[str, Any]) -> str:
        """Add one entry and write the file atomically; returns the new head hash."""
        if kind not in KINDS:
            raise ValueError(f"unknown state entry kind {kind!r}")
        body = json.loads(json.dumps(body, allow_nan=False))  # plain JSON values only
        seq, prev = len(self.entries), self.head
        entry = {"seq": seq, "kind": kind, "body": body, "prev": prev,
                 "hash": _entry_hash(seq, kind, body, prev)}
        self.root.mkdir(parents=True, exist_ok=True)
        doc = {"format": FORMAT, "entries": [*self.entries, entry], "head": entry["hash"]}
        write_atomic(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())
        self.entries.append(entry)
        return str(entry["hash"])

    def store_solution(self, solution: Solution) -> str:
        """Keep ``solution`` content-addressed under ``solutions/``; returns its key."""
        key = candidate_key(solution)
        folder = self.root / "solutions"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{key.removeprefix('sha256:')}.json"
        if not path.exists():
            write_atomic(path, json.dumps(solution.to_json_dict(), indent=1).encode())
        return key

    def load_solution(self, key: str) -> Solution:
        from ..intake import load_solution

        path = self.root / "solutions" / f"{key.removeprefix('sha256:')}.json"
        if not path.is_file():
            raise InputError(f"solution {key} named by the state is missing", where=str(path))
        sol = load_solution(path)
        if candidate_key(sol) != key:
            raise InputError(f"solution does not match its hash {key}", where=str(path))
        return sol


def verify(doc: Any, where: str) -> list[dict[str, Any]]:
    """The entries of a state document whose hash chain holds; InputError naming the first
    entry that does not."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"not a campaign state (format must be {FORMAT!r})", where=where)
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise InputError("entries must be a list", where=where)
    prev = GENESIS
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or set(e) != {"seq", "kind", "body", "prev", "hash"}:
            raise InputError(f"entry {i} is malformed", where=where)
        if e["seq"] != i or e["prev"] != prev:
            raise InputError(f"entry {i} is out of order or does not chain to entry {i - 1} "
                             "(history edited or truncated)", where=where)
        if e["kind"] not in KINDS or not isinstance(e["body"], dict):
            raise InputError(f"entry {i} has an unknown kind or body", where=where)
        try:
            good = _entry_hash(i, e["kind"], e["body"], prev)
        except Exception:  # noqa: BLE001  a value canonical JSON cannot hold
            raise InputError(f"entry {i} holds a value canonical JSON cannot encode",
                             where=where) from None
        if e["hash"] != good:
            raise InputError(f"entry {i}'s hash does not match its content (edited or "
                             "corrupt)", where=where)
        prev = good
    if doc.get("head") != prev:
        raise InputError("head does not match the last entry (history truncated or edited)",
                         where=where)
    return entries
