"""The token file: one entry per agent, holding the sha256 of its bearer token (never the token).

```json
{"version": 1, "agents": [{"id": "claude-1", "token_sha256": "sha256:...",
  "definitions": ["rmsnorm_*"], "tools": ["*"], "submissions_per_hour": 20,
  "gpu_seconds_per_hour": 600, "requests_per_minute": 60}]}
```

The file is written 0600 and refused when others may write it (whoever can edit it can mint
an agent). Tokens are 32 random bytes, URL-safe base64, prefixed ``shx_``; a presented token is
hashed and compared with every entry in constant time.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Annotated

from pydantic import Field, StringConstraints, ValidationError

from ..errors import InputError
from ..models._base import FrozenModel, Label, Name

__all__ = ["TOOLS", "AgentGrant", "TokenFile", "TokenFileError", "add_agent", "hash_token",
           "load_token_file", "local_grant", "new_token"]

TOOLS = ("list_definitions", "get_task", "submit_candidate", "get_verdict", "get_profile",
         "campaign_status")
"""Every tool the gateway serves (capabilities name a subset, or ``*``)."""
MAX_TOKEN_FILE = 1024 * 1024
_HASH = r"^sha256:[0-9a-f]{64}$"


class TokenFileError(InputError):
    """A token file that cannot be read, is unsafe, or does not validate."""


class AgentGrant(FrozenModel):
    """What one agent may do."""

    id: Name
    """The agent's id: it names the agent in every audit record."""
    token_sha256: Annotated[str, StringConstraints(pattern=_HASH)]
    definitions: list[Label] = Field(default_factory=lambda: ["*"], max_length=256)
    """``fnmatch`` globs over definition names the agent may see and submit for."""
    tools: list[Label] = Field(default_factory=lambda: ["*"], max_length=64)
    """Tool names (or ``*``) the agent may call."""
    submissions_per_hour: int = Field(default=20, ge=0, le=100_000)
    gpu_seconds_per_hour: float = Field(default=600.0, ge=0, le=86400 * 64)
    """Evaluation time (the wall time an evaluation holds its GPU lane, or the CPU on a
    machine without one) the agent's submissions may use in any hour."""
    requests_per_minute: int = Field(default=60, ge=1, le=100_000)
    """Tool calls per minute (a token bucket of this size, refilled continuously)."""

    def may_use_tool(self, tool: str) -> bool:
        return "*" in self.tools or tool in self.tools

    def may_see(self, definition: str) -> bool:
        return any(fnmatch.fnmatchcase(definition, g) for g in self.definitions)


class TokenFile(FrozenModel):
    version: int = Field(default=1, ge=1, le=1)
    agents: list[AgentGrant] = Field(default_factory=list, max_length=10_000)

    def find(self, token: str) -> AgentGrant | None:
        """The agent holding ``token`` (every entry compared, in constant time each)."""
        want = hash_token(token)
        found = None
        for agent in self.agents:
            if hmac.compare_digest(agent.token_sha256, want):
                found = agent
        return found

    def get(self, agent_id: str) -> AgentGrant | None:
        return next((a for a in self.agents if a.id == agent_id), None)


def new_token() -> str:
    return "shx_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def local_grant(agent_id: str = "local") -> AgentGrant:
    """The stdio user: the process owner, trusted with every tool and definition (no token,
    no budget) unless a token file's entry is named instead."""
    return AgentGrant(id=agent_id, token_sha256="sha256:" + "0" * 64,
                      submissions_per_hour=100_000, gpu_seconds_per_hour=86400 * 64,
                      requests_per_minute=100_000)


def load_token_file(path: Path) -> TokenFile:
    try:
        st = path.lstat()
    except OSError as e:
        raise TokenFileError(f"cannot read: {e.strerror}", where=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise TokenFileError("not a regular file", where=str(path))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise TokenFileError("writable by group or others (chmod 600 it)", where=str(path))
    if st.st_size > MAX_TOKEN_FILE:
        raise TokenFileError(f"{st.st_size} bytes, over the {MAX_TOKEN_FILE}-byte cap",
                             where=str(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tf = TokenFile.model_validate(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenFileError(f"not JSON: {e}", where=str(path)) from None
    except ValidationError as e:
        err = e.errors()[0]
        raise TokenFileError(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}",
                             where=str(path)) from None
    ids = [a.id for a in tf.agents]
    if len(set(ids)) != len(ids):
        raise TokenFileError("an agent id appears twice", where=str(path))
    return tf


def _write(path: Path, tf: TokenFile) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(tf.model_dump(mode="json"), indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def add_agent(path: Path, grant_fields: dict[str, object], *, replace: bool = False) -> str:
    """Mint a token for a new agent entry in ``path`` (created 0600 if missing); returns the
    token, which is stored nowhere: only its hash is written."""
    tf = load_token_file(path) if path.exists() else TokenFile()
    token = new_token()
    try:
        grant = AgentGrant.model_validate({**grant_fields, "token_sha256": hash_token(token)})
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None
    if tf.get(grant.id) is not None and not replace:
        raise TokenFileError(f"agent {grant.id!r} already has a token (--replace to rotate)",
                             where=str(path))
    unknown = [t for t in grant.tools if t != "*" and t not in TOOLS]
    if unknown:
        raise InputError(f"unknown tools {unknown} (known: {', '.join(TOOLS)})")
    _write(path, TokenFile(agents=[*(a for a in tf.agents if a.id != grant.id), grant]))
    return token
