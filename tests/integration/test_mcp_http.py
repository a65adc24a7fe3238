"""The MCP gateway over streamable HTTP, started as a real subprocess on 127.0.0.1: bearer
tokens (401 without or with a wrong one), capabilities, budgets, the rate limit, and every
authenticated call in a log that verifies."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import REPO
from tests.integration.gateway_setup import PY, Setup, audited_calls, cli, make_setup, solution

pytestmark = pytest.mark.slow  # a real HTTP gateway subprocess and evaluations (~85 s)

AGENTS = {
    "alice": ["--submissions-per-hour", "0"],  # may submit, but has no budget left
    "bob": ["--definitions", "softmax_*", "--tools", "list_definitions,get_task",
            "--requests-per-minute", "3"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, str]]:
    s = make_setup(tmp_path_factory.mktemp("gw"), AGENTS)
    port = _free_port()
    proc = subprocess.Popen([PY, *s.serve_args("--http", f"127.0.0.1:{port}")], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"gateway exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    try:
        yield s, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.parametrize("auth", [None, "Bearer shx_wrong", "Basic YWxpY2U6eA==", "Bearer",
                                  "bearer shx_" + "A" * 43])
def test_requests_without_a_valid_token_get_401(server: tuple[Setup, str],
                                                auth: str | None) -> None:
    _, url = server
    headers = dict(HEADERS, **({"authorization": auth} if auth else {}))
    r = httpx.post(url, json=INIT, headers=headers, timeout=10)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(url, headers=headers, timeout=10).status_code == 401


async def _session_calls(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]
                         ) -> list[tuple[bool, Any]]:
    out = []
    client = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with client, streamable_http_client(url, http_client=client) as (
            r, w, _), ClientSession(r, w) as session:
        await session.initialize()
        for tool, args in calls:
            res = await session.call_tool(tool, args)
            out.append((not res.isError, res.content[0].text if res.isError  # type: ignore[union-attr]
                        else res.structuredContent))
    return out


def test_capabilities_budgets_rate_limit_and_audit(server: tuple[Setup, str]) -> None:
    s, url = server
    bob = anyio.run(_session_calls, url, s.tokens["bob"], [
        ("list_definitions", {}), ("get_task", {"definition": "rmsnorm_h128"}),
        ("submit_candidate", {"solution": solution()}), ("get_task",
                                                         {"definition": "softmax_v512"})])
    assert bob[0][0] and [d["name"] for d in bob[0][1]["result"]] == ["softmax_v512"]
    assert not bob[1][0] and "no definition" in bob[1][1]
    assert not bob[2][0] and "may not call submit_candidate" in bob[2][1]
    assert not bob[3][0] and "rate limit" in bob[3][1]  # the 4th call in a minute, limit 3
    alice = anyio.run(_session_calls, url, s.tokens["alice"], [
        ("submit_candidate", {"solution": solution()}),
        ("get_task", {"definition": "rmsnorm_h128"}),
        ("get_verdict", {"id": "v_0123456789abcdef"})])
    assert not alice[0][0] and "submission budget spent" in alice[0][1]
    assert alice[1][0] and alice[1][1]["sha256"] in alice[1][1]["markdown"]
    assert not alice[2][0] and "no submission" in alice[2][1]

    events = audited_calls(s)
    assert [(e["agent"], e["tool"], e["outcome"]) for e in events] == [
        ("bob", "list_definitions", "ok"), ("bob", "get_task", "refused"),
        ("bob", "submit_candidate", "refused"), ("bob", "get_task", "refused"),
        ("alice", "submit_candidate", "refused"), ("alice", "get_task", "ok"),
        ("alice", "get_verdict", "refused")]
    assert all(e["transport"] == "http" for e in events)
    assert "rate limit" in str(events[3]["reason"])


def test_bind_and_token_rules_are_one_line_errors(tmp_path: Path) -> None:
    s = make_setup(tmp_path, {"a": []})
    for extra, message in [
        (["--http", "0.0.0.0:8123"], "not a loopback address"),
        (["--http", "127.0.0.1:notaport"], "expected HOST:PORT"),
    ]:
        done = cli(*s.serve_args(*extra)[2:])
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    done = cli("mcp", "serve", "--local", str(s.dataset), "--http", "127.0.0.1:8123",
               "--audit-log", str(s.log))
    assert done.returncode == 2 and "--token-file" in done.stderr
    done = cli("mcp", "token", "add", "--agent", "a", "--token-file", str(s.token_file))
    assert done.returncode == 2 and "already has a token" in done.stderr
    s.token_file.chmod(0o666)
    done = cli(*s.serve_args("--http", "127.0.0.1:8123")[2:])
    assert done.returncode == 2 and "writable by group or others" in done.stderr
