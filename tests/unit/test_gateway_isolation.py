"""The gateway between agents: one agent's submissions are not another's to read (refused with
the answer an unknown id gets, so nothing says the id exists), and the token file holds only
hashes, each token finding its own agent and no other."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from sandboxharness.api import default_policy
from sandboxharness.gateway.store import GatewayStore, new_id
from sandboxharness.gateway.tokens import AgentGrant, add_agent, hash_token, load_token_file
from sandboxharness.gateway.tools import Gateway, GatewayConfig, Refused
from tests.unit.test_mcp_generator import _dataset
from tests.unit.test_report_tables import gpu_verdict


def _grant(agent: str) -> AgentGrant:
    return AgentGrant(id=agent, token_sha256=hash_token(f"shx_{agent}"))


def test_another_agents_verdict_is_refused_like_an_unknown_id(tmp_path: Path) -> None:
    """Attack: agent b asks for the verdict (or profile) of agent a's submission by its id."""
    state = tmp_path / "gw"
    gateway = Gateway(GatewayConfig(dataset=_dataset(tmp_path), state=state,
                                    policy=default_policy()))
    vid = new_id()
    GatewayStore(state).save_submission(vid, {
        "agent": "a", "solution": {}, "verdict": gpu_verdict("k1").model_dump(mode="json")})
    alice, bob = _grant("a"), _grant("b")
    assert gateway.call(alice, "get_verdict", {"id": vid})["decision"] == "promote"
    assert gateway.call(alice, "get_profile", {"id": vid})["id"] == vid
    unknown = new_id()
    for tool in ("get_verdict", "get_profile"):
        with pytest.raises(Refused) as theirs:
            gateway.call(bob, tool, {"id": vid})
        with pytest.raises(Refused) as nobodys:
            gateway.call(bob, tool, {"id": unknown})
        assert str(theirs.value).replace(vid, "ID") == str(nobodys.value).replace(unknown, "ID")
        assert "promote" not in str(theirs.value)


def test_token_file_holds_only_hashes_and_each_token_finds_its_agent(tmp_path: Path) -> None:
    path = tmp_path / "agents.json"
    tokens = {agent: add_agent(path, {"id": agent}) for agent in ("a", "b")}
    text = path.read_text()
    assert all(t not in text for t in tokens.values())  # never the token itself
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [a["token_sha256"] for a in json.loads(text)["agents"]] == \
        [hash_token(tokens["a"]), hash_token(tokens["b"])]
    tf = load_token_file(path)
    found = {agent: tf.find(token) for agent, token in tokens.items()}
    assert {agent: g.id if g else None for agent, g in found.items()} == {"a": "a", "b": "b"}
    assert tf.find(tokens["a"] + "x") is None and tf.find("") is None


def test_only_authenticated_http_and_lifespan_reach_the_app(tmp_path: Path) -> None:
    """The bearer check sits in front of everything: a websocket (or any other scope) is
    closed unauthenticated instead of passing through, a request without a valid token gets
    401, and only lifespan and authenticated HTTP reach the MCP app."""
    import asyncio

    from sandboxharness.gateway.server import BearerAuth

    token = add_agent(tmp_path / "tokens.json", {"id": "agent-1"})
    reached: list[str] = []
    sent: list[dict[str, object]] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        reached.append(str(scope["type"]))

    async def send(msg: dict[str, object]) -> None:
        sent.append(msg)

    async def receive() -> dict[str, object]:
        return {}

    auth = BearerAuth(app, load_token_file(tmp_path / "tokens.json"))  # type: ignore[arg-type]

    def call(scope: dict[str, object]) -> None:
        asyncio.run(auth(scope, receive, send))  # type: ignore[arg-type]

    call({"type": "websocket", "headers": []})
    assert reached == [] and sent[-1] == {"type": "websocket.close", "code": 1008}
    call({"type": "http", "headers": [(b"authorization", b"Bearer wrong")]})
    assert reached == [] and sent[-2]["status"] == 401
    call({"type": "lifespan"})
    call({"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]})
    assert reached == ["lifespan", "http"]
