"""``sandboxharness mcp``: serve the gateway (stdio or HTTP) and mint agent tokens.

Thin: parsing and one-line errors here, everything else in :mod:`sandboxharness.gateway`.
Under stdio, stdout is the protocol channel: nothing else is ever printed to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from ..errors import HarnessError, InfrastructureError, InputError
from ..models import Policy
from .output import eprint, fail

mcp_app = typer.Typer(no_args_is_help=True, help="The MCP gateway for agents.")
token_app = typer.Typer(no_args_is_help=True, help="Agent tokens for the HTTP gateway.")
mcp_app.add_typer(token_app, name="token")


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"expected HOST:PORT, got {text!r}", where="--http")
    return host, int(port)


def _gateway_parts(local: Path, state: Path | None, policy: Path | None
                   ) -> tuple[Path, Policy]:
    from ..api import default_policy
    from ..intake import load_policy

    if not (local / "definitions").is_dir():
        raise InputError("not a FlashInfer-Bench dataset: no definitions/ folder",
                         where=str(local))
    pol = load_policy(policy) if policy else default_policy()
    root = state or local / "gateway"
    root.mkdir(parents=True, exist_ok=True)
    return root, pol


@dataclass(frozen=True)
class ServeOptions:
    local: Path
    http: str | None
    token_file: Path | None
    agent: str | None
    allow_remote_bind: bool
    state: Path | None
    policy: Path | None
    audit_log: Path | None
    signing_key: Path | None
    campaigns: Path | None
    skills: Path | None
    backend: str | None


@mcp_app.command("serve")
def serve(  # noqa: PLR0913  (typer: one parameter per CLI flag)
    *,  # options only
    local: Annotated[Path, typer.Option("--local", help="The FlashInfer-Bench dataset.")],
    http: Annotated[str | None, typer.Option(help="HOST:PORT: streamable HTTP at /mcp "
                                                  "(default: stdio).")] = None,
    token_file: Annotated[Path | None, typer.Option(help="Agents and token hashes (HTTP: "
                                                         "required).")] = None,
    agent: Annotated[str | None, typer.Option(help="stdio: act as this token-file agent "
                                                   "(its capabilities and budgets).")] = None,
    allow_remote_bind: Annotated[bool, typer.Option(help="Allow a non-loopback HTTP "
                                                         "address.")] = False,
    state: Annotated[Path | None, typer.Option(help="Gateway state (default "
                                                    "DATASET/gateway).")] = None,
    policy: Annotated[Path | None, typer.Option(help="Policy YAML.")] = None,
    audit_log: Annotated[Path | None, typer.Option(help="Audit log (HTTP: required).")] = None,
    signing_key: Annotated[Path | None, typer.Option(help="Signing key for the log.")] = None,
    campaigns: Annotated[Path | None, typer.Option(help="Folder of campaign state dirs.")] = None,
    skills: Annotated[Path | None, typer.Option(help="Skills folder (default: shipped).")] = None,
    backend: Annotated[str | None, typer.Option(help="auto | process | docker")] = None,
) -> None:
    """Serve the gateway: stdio for one local agent, or HTTP with bearer tokens."""
    try:
        _serve(ServeOptions(local, http, token_file, agent, allow_remote_bind, state, policy,
                            audit_log, signing_key, campaigns, skills, backend))
    except HarnessError as e:
        fail(e)


def _serve(o: ServeOptions) -> None:
    try:
        from ..gateway import server
    except ImportError:
        raise InfrastructureError("the MCP SDK is not installed: pip install "
                                  "'sandboxharness[mcp]'") from None
    from ..gateway.tokens import load_token_file, local_grant
    from ..gateway.tools import Gateway, GatewayConfig
    from . import audit_hook

    hostport = parse_hostport(o.http) if o.http else None
    if hostport:
        server.check_bind(hostport[0], allow_remote=o.allow_remote_bind)
        if o.token_file is None:
            raise InputError("--http needs --token-file (no unauthenticated HTTP)")
        if o.audit_log is None:
            raise InputError("--http needs --audit-log (every agent's call is recorded)")
    tokens = load_token_file(o.token_file) if o.token_file else None
    root, pol = _gateway_parts(o.local, o.state, o.policy)
    signer = audit_hook.load_signer_first(o.audit_log, o.signing_key, None, o.policy)
    hidden = [*audit_hook.secret_paths(o.audit_log, o.signing_key), root.resolve(),
              *([o.token_file.resolve()] if o.token_file else [])]
    gateway = Gateway(GatewayConfig(
        dataset=o.local, state=root, policy=pol, transport="http" if hostport else "stdio",
        audit_log=o.audit_log, signer=signer, campaigns=o.campaigns, skills=o.skills,
        backend=o.backend, hidden_paths=tuple(hidden)))
    if hostport and tokens is not None:
        eprint(f"sandboxharness gateway: http://{hostport[0]}:{hostport[1]}/mcp "
               f"({len(tokens.agents)} agents)")
        server.serve_http(gateway, tokens, *hostport)
        return
    grant = local_grant()
    if o.agent is not None:
        found = tokens.get(o.agent) if tokens else None
        if found is None:
            raise InputError(f"no agent {o.agent!r} in the token file", where="--agent")
        grant = found
    server.serve_stdio(gateway, grant)


def _csv(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


@token_app.command("add")
def token_add(  # noqa: PLR0913  (typer: one parameter per CLI flag)
    *,  # options only
    agent: Annotated[str, typer.Option(help="The agent's id (named in every audit record).")],
    token_file: Annotated[Path, typer.Option(help="Token file (created 0600).")],
    definitions: Annotated[str | None, typer.Option(help="Definition globs, comma-separated "
                                                         "(default *).")] = None,
    tools: Annotated[str | None, typer.Option(help="Tools, comma-separated (default *).")] = None,
    submissions_per_hour: Annotated[int | None, typer.Option()] = None,
    gpu_seconds_per_hour: Annotated[float | None, typer.Option()] = None,
    requests_per_minute: Annotated[int | None, typer.Option()] = None,
    replace: Annotated[bool, typer.Option(help="Rotate an existing agent's token.")] = False,
) -> None:
    """Add an agent and print its bearer token once (only its sha256 is stored)."""
    from ..gateway.tokens import add_agent

    fields: dict[str, object] = {"id": agent}
    for key, value in (("definitions", _csv(definitions)), ("tools", _csv(tools)),
                       ("submissions_per_hour", submissions_per_hour),
                       ("gpu_seconds_per_hour", gpu_seconds_per_hour),
                       ("requests_per_minute", requests_per_minute)):
        if value is not None:
            fields[key] = value
    try:
        token = add_agent(token_file, fields, replace=replace)
    except HarnessError as e:
        fail(e)
    print(token)
    eprint(f"agent {agent!r} added to {token_file}; the token above is shown only once")
