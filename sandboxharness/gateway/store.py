"""The gateway's state folder: submissions, verdicts, task bundles and the round mailbox.

```
STATE/verdicts/<id>.json          {"agent", "solution", "verdict"} of one submission
STATE/bundles/<sha256-hex>.json   every task bundle handed out (what an agent was told)
STATE/best/<definition>.json      the fastest promoted submission per definition
STATE/rounds/<round>/task.json    a round the ``mcp`` generator opened (its TaskBundle)
STATE/rounds/<round>/submissions/<id>.json   solutions agents submitted for it
STATE/budgets.json                spending per agent over the last hour
```
Ids are generated here (``v_`` and 16 hex digits) and checked on the way back in, so no
argument ever names a path.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["GatewayStore", "new_id", "valid_id"]

_ID = re.compile(r"^v_[0-9a-f]{16}$")
_ROUND = re.compile(r"^r_[0-9a-f]{16}$")


def new_id() -> str:
    return "v_" + secrets.token_hex(8)


def valid_id(text: str) -> bool:
    return bool(_ID.match(text))


def write_json(path: Path, obj: Any) -> None:
    """Whole-file write: a temporary beside it, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class GatewayStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        for sub in ("verdicts", "bundles", "best", "rounds"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def save_submission(self, vid: str, record: dict[str, Any]) -> None:
        write_json(self.root / "verdicts" / f"{vid}.json", record)

    def load_submission(self, vid: str) -> dict[str, Any] | None:
        if not valid_id(vid):
            raise InputError(f"not a submission id: {vid[:40]!r}")
        path = self.root / "verdicts" / f"{vid}.json"
        if not path.is_file():
            return None
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def save_bundle(self, sha256: str, bundle: dict[str, Any]) -> None:
        path = self.root / "bundles" / f"{sha256.removeprefix('sha256:')}.json"
        if not path.exists():
            write_json(path, bundle)

    def best(self, definition: str) -> dict[str, Any] | None:
        path = self.root / "best" / f"{definition}.json"
        if not path.is_file():
            return None
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def offer_best(self, definition: str, solution: dict[str, Any], mean_ms: float,
                   vid: str) -> None:
        cur = self.best(definition)
        if cur is None or mean_ms < float(cur.get("mean_ms", float("inf"))):
            write_json(self.root / "best" / f"{definition}.json",
                       {"id": vid, "mean_ms": mean_ms, "solution": solution})

    # --- the round mailbox shared with generators.mcp -------------------------------------
    def open_rounds(self, definition: str) -> list[Path]:
        """Open rounds for ``definition``, newest first."""
        out = []
        for d in (self.root / "rounds").iterdir():
            task = d / "task.json"
            if _ROUND.match(d.name) and task.is_file() and not (d / "closed").exists():
                try:
                    name = json.loads(task.read_text())["bundle"]["definition"]["name"]
                except (ValueError, KeyError, TypeError):
                    continue
                if name == definition:
                    out.append(d)
        return sorted(out, key=lambda p: p.stat().st_mtime, reverse=True)

    def open_round(self, bundle: dict[str, Any], markdown: str) -> Path:
        d = self.root / "rounds" / ("r_" + secrets.token_hex(8))
        (d / "submissions").mkdir(parents=True)
        write_json(d / "task.json", {"bundle": bundle, "markdown": markdown})
        return d

    @staticmethod
    def close_round(d: Path) -> None:
        (d / "closed").touch()

    @staticmethod
    def deliver(d: Path, vid: str, solution: dict[str, Any]) -> None:
        write_json(d / "submissions" / f"{vid}.json", solution)
