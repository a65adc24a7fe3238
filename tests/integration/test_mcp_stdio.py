"""The MCP gateway over stdio with the SDK's real client: the tools, a real evaluation of a
submitted Solution (Triton interpreter on CPU), and every call in a log that verifies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import REPO
from tests.integration.gateway_setup import PY, audited_calls, make_setup, solution

pytestmark = pytest.mark.slow  # real evaluations through a gateway subprocess (~75 s)


async def _call(session: ClientSession, tool: str, **args: Any) -> tuple[bool, Any]:
    res = await session.call_tool(tool, args)
    if res.isError:
        return False, res.content[0].text  # type: ignore[union-attr]
    return True, res.structuredContent


def test_stdio_tools_evaluate_for_real_and_are_audited(tmp_path: Path) -> None:
    s = make_setup(tmp_path, {"limited": ["--definitions", "softmax_*",
                                          "--tools", "list_definitions,get_task"]})
    params = StdioServerParameters(command=PY, args=s.serve_args(), cwd=str(REPO))
    limited = StdioServerParameters(command=PY, args=s.serve_args("--agent", "limited"),
                                    cwd=str(REPO))

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"list_definitions", "get_task", "submit_candidate", "get_verdict",
                    "get_profile", "campaign_status"} <= tools
            ok, defs = await _call(session, "list_definitions")
            assert ok and [d["name"] for d in defs["result"]] == ["rmsnorm_h128", "softmax_v512"]
            ok, task = await _call(session, "get_task", definition="rmsnorm_h128",
                                   direction="memory")
            assert ok and task["sha256"] in task["markdown"]
            assert "Promotion rules in force" in task["markdown"]
            out["bundle"] = task["sha256"]
            ok, verdict = await _call(session, "submit_candidate", solution=solution())
            assert ok, verdict
            out["verdict"] = verdict
            ok, again = await _call(session, "get_verdict", id=verdict["id"])
            assert ok and again["decision"] == verdict["decision"]
            ok, prof = await _call(session, "get_profile", id=verdict["id"])
            assert ok and prof["id"] == verdict["id"]
            ok, msg = await _call(session, "get_verdict", id="../../etc/passwd")
            assert not ok and "not a submission id" in msg
            ok, msg = await _call(session, "campaign_status", campaign="nope")
            assert not ok
        async with stdio_client(limited) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            ok, defs = await _call(session, "list_definitions")
            assert ok and [d["name"] for d in defs["result"]] == ["softmax_v512"]
            ok, msg = await _call(session, "get_task", definition="rmsnorm_h128")
            assert not ok and "no definition" in msg  # not visible to this agent
            ok, msg = await _call(session, "submit_candidate", solution=solution())
            assert not ok and "may not call submit_candidate" in msg
        return out

    out = anyio.run(main)
    v = out["verdict"]
    assert v["decision"] == "promote", v["reasons"]
    assert v["workloads"] and all(w["latency_ms"] > 0 for w in v["workloads"])
    assert v["candidate_sha256"].startswith("sha256:")
    # the bundle handed out is archived under its hash
    assert (s.state / "bundles" / (out["bundle"].removeprefix("sha256:") + ".json")).is_file()

    events = audited_calls(s)
    assert [(e["agent"], e["tool"], e["outcome"]) for e in events] == [
        ("local", "list_definitions", "ok"), ("local", "get_task", "ok"),
        ("local", "submit_candidate", "ok"), ("local", "get_verdict", "ok"),
        ("local", "get_profile", "ok"), ("local", "get_verdict", "refused"),
        ("local", "campaign_status", "refused"),
        ("limited", "list_definitions", "ok"), ("limited", "get_task", "refused"),
        ("limited", "submit_candidate", "refused")]
    sub = events[2]
    assert sub["decision"] == "promote" and sub["id"] == v["id"]
    assert sub["candidate_sha256"] == v["candidate_sha256"]
    assert events[1]["bundle_sha256"] == out["bundle"]
    assert all(e["transport"] == "stdio" and str(e["arguments_sha256"]).startswith("sha256:")
               for e in events)
    # the verdict itself is in the log too, beside the calls
    records = [json.loads(x) for x in s.log.read_bytes().splitlines()]
    assert sum(1 for r in records if "verdict" in r) == 1
