"""The MCP server (official ``mcp`` SDK): stdio for a local agent, streamable HTTP at ``/mcp``
behind bearer-token authentication for agents that connect over the network.

HTTP is stateless (every POST is authenticated and served on its own, so nothing one agent
opens can be used under another's token). A request without a valid token never reaches the
MCP layer: 401. The listener is loopback unless the caller explicitly allows another address.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from ..errors import HarnessError, InputError
from .tokens import AgentGrant, TokenFile
from .tools import Gateway

__all__ = ["BearerAuth", "build_server", "check_bind", "serve_http", "serve_stdio"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""A solution's sources are capped at 32 x 256 KiB by the default policy: 8 MiB is ample."""
_AGENT_KEY = "sandboxharness.agent"
INSTRUCTIONS = (
    "sandboxharness evaluates GPU kernels in a sandbox and decides whether to promote them. "
    "Call list_definitions, then get_task(definition) for the task bundle (definition, "
    "constraints, current best, skills, promotion rules). Submit a FlashInfer-Bench Solution "
    "with submit_candidate; the harness measures and decides, your claims are not read.")


class BearerAuth:
    """ASGI middleware: ``Authorization: Bearer <token>`` must match an agent of the token
    file, else 401 before anything else runs. The agent rides on the request scope."""

    def __init__(self, app: ASGIApp, tokens: TokenFile) -> None:
        self.app, self.tokens = app, tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # the app's own start and stop
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket or anything newer: never unauthenticated
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
        scheme, _, token = header.decode("latin-1").partition(" ")
        grant = (self.tokens.find(token.strip())
                 if scheme.lower() == "bearer" and token.strip() else None)
        if grant is None:
            body = json.dumps({"error": "unauthorized",
                               "message": "a valid bearer token is required"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="sandboxharness"'),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        scope[_AGENT_KEY] = grant
        await self.app(scope, receive, send)


GrantOf = Callable[[Context[Any, Any, Any]], AgentGrant]


def _http_grant(ctx: Context[Any, Any, Any]) -> AgentGrant:
    request = ctx.request_context.request
    grant = getattr(request, "scope", {}).get(_AGENT_KEY) if request is not None else None
    if not isinstance(grant, AgentGrant):  # cannot happen behind BearerAuth; fail closed
        raise ToolError("unauthenticated")
    return grant


def build_server(gateway: Gateway, grant_of: GrantOf, *, host: str = "127.0.0.1",
                 port: int = 8000) -> FastMCP[Any]:
    mcp = FastMCP("sandboxharness", instructions=INSTRUCTIONS, host=host, port=port,
                  stateless_http=True, json_response=True,
                  max_request_body_size=MAX_REQUEST_BYTES, log_level="WARNING")

    async def run(tool: str, args: dict[str, Any], ctx: Context[Any, Any, Any]) -> Any:
        grant = grant_of(ctx)
        try:
            return await anyio.to_thread.run_sync(gateway.call, grant, tool, args)
        except HarnessError as e:
            raise ToolError(str(e)) from None

    @mcp.tool(description="Definitions this agent may work on: name, op_type, workload "
              "count, description, sha256.")
    async def list_definitions(ctx: Context[Any, Any, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await run("list_definitions", {}, ctx)
        return out

    @mcp.tool(description="The task bundle for a definition, as markdown, with its sha256 "
              "(definition, policy constraints, current best, profile signatures, direction, "
              "skill excerpts, promotion rules). 'direction' selects direction-specific skill "
              "sections (e.g. 'memory', 'latency').")
    async def get_task(definition: str, ctx: Context[Any, Any, Any],
                       direction: str | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"definition": definition}
        if direction is not None:
            args["direction"] = direction
        out: dict[str, Any] = await run("get_task", args, ctx)
        return out

    @mcp.tool(description="Evaluate a FlashInfer-Bench Solution (name, definition, author, "
              "spec, sources) in the sandbox: returns the verdict summary (id, decision, "
              "reasons, per-workload latency and speedup, profile signature on GPU).")
    async def submit_candidate(solution: dict[str, Any],
                               ctx: Context[Any, Any, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await run("submit_candidate", {"solution": solution}, ctx)
        return out

    @mcp.tool(description="The verdict summary of one of this agent's submissions.")
    async def get_verdict(id: str, ctx: Context[Any, Any, Any]) -> dict[str, Any]:  # noqa: A002
        out: dict[str, Any] = await run("get_verdict", {"id": id}, ctx)
        return out

    @mcp.tool(description="The profile stage (Nsight Compute signature per regime) of one of "
              "this agent's submissions; on a machine without a GPU, why it was skipped.")
    async def get_profile(id: str, ctx: Context[Any, Any, Any]) -> dict[str, Any]:  # noqa: A002
        out: dict[str, Any] = await run("get_profile", {"id": id}, ctx)
        return out

    @mcp.tool(description="A campaign's state: rounds, best mean latency, recent verdicts.")
    async def campaign_status(campaign: str, ctx: Context[Any, Any, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await run("campaign_status", {"campaign": campaign}, ctx)
        return out

    return mcp


def serve_stdio(gateway: Gateway, grant: AgentGrant) -> None:
    build_server(gateway, lambda _ctx: grant).run(transport="stdio")


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Loopback only, unless the operator says otherwise in so many words."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        raise InputError(f"not an IP address or 'localhost': {host!r}", where="--http") from None
    if not loopback and not allow_remote:
        raise InputError(f"{host} is not a loopback address: pass --allow-remote-bind to "
                         "listen beyond this machine (tokens travel in clear without TLS in "
                         "front)", where="--http")


def serve_http(gateway: Gateway, tokens: TokenFile, host: str, port: int) -> None:
    import uvicorn

    mcp = build_server(gateway, _http_grant, host=host, port=port)
    app = BearerAuth(mcp.streamable_http_app(), tokens)
    uvicorn.Server(uvicorn.Config(app, host=host.strip("[]"), port=port, log_level="warning",
                                  server_header=False)).run()
