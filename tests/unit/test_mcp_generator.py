"""The ``mcp`` generator: a round opened in the gateway's state, handed to agents by the
gateway's own get_task (same bundle hash), solutions delivered to it read back through intake,
and a bounded wait that ends in GeneratorError when no agent submits."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from sandboxharness.api import default_policy
from sandboxharness.gateway.store import GatewayStore, new_id
from sandboxharness.gateway.tokens import local_grant
from sandboxharness.gateway.tools import Gateway, GatewayConfig
from sandboxharness.generators.interface import Generator, GeneratorError
from sandboxharness.generators.mcp import MCPGenerator
from sandboxharness.intake import load_definition, load_solution
from sandboxharness.loop.bundle import build_task_bundle
from tests.conftest import REPO

NAME = "rmsnorm_h128"


def _dataset(tmp: Path) -> Path:
    ds = tmp / "ds"
    for sub, ext in (("definitions", ".json"), ("workloads", ".jsonl")):
        (ds / sub).mkdir(parents=True)
        shutil.copy(REPO / "kernels" / sub / f"{NAME}{ext}", ds / sub / f"{NAME}{ext}")
    return ds


def test_round_is_served_by_the_gateway_and_returns_delivered_solutions(tmp_path: Path) -> None:
    state = tmp_path / "gw"
    gateway = Gateway(GatewayConfig(dataset=_dataset(tmp_path), state=state,
                                    policy=default_policy()))
    task = build_task_bundle(load_definition(REPO / "kernels/definitions" / f"{NAME}.json"),
                             default_policy(), round=2)
    gen = MCPGenerator(state, wait_s=30, poll_s=0.05)
    assert isinstance(gen, Generator)
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(gen.propose(task, 1)))
    worker.start()
    store = GatewayStore(state)
    for _ in range(200):
        if store.open_rounds(NAME):
            break
        time.sleep(0.05)
    answer = gateway.call(local_grant(), "get_task", {"definition": NAME})
    assert answer["sha256"] == task.sha256 and answer["campaign_round"]
    rnd = store.open_rounds(NAME)[0]
    (rnd / "submissions" / "v_00000000000000ff.json").write_text("{not json")  # skipped
    sol = load_solution(REPO / "kernels/solutions" / NAME / "triton_dps.json")
    store.deliver(rnd, new_id(), sol.to_json_dict())
    worker.join(timeout=30)
    assert got and [s.name for s in got[0]] == [sol.name]  # type: ignore[attr-defined]
    assert any("v_00000000000000ff" in n for n in gen.notes)
    assert store.open_rounds(NAME) == []  # closed: later submissions go nowhere


def test_no_submission_ends_the_wait_with_a_generator_error(tmp_path: Path) -> None:
    task = build_task_bundle(load_definition(REPO / "kernels/definitions" / f"{NAME}.json"),
                             default_policy())
    t0 = time.monotonic()
    with pytest.raises(GeneratorError, match="no agent submitted"):
        MCPGenerator(tmp_path / "gw", wait_s=0.3, poll_s=0.05).propose(task, 2)
    assert time.monotonic() - t0 < 5


def test_campaign_status_reads_the_verified_state(tmp_path: Path) -> None:
    from sandboxharness.gateway.tokens import AgentGrant
    from sandboxharness.gateway.tools import Refused
    from sandboxharness.loop.state import CampaignState

    camps = tmp_path / "campaigns"
    (camps / "c1").mkdir(parents=True)
    st = CampaignState.open(camps / "c1")
    st.append("campaign", {"definition": NAME, "generator": "mcp", "policy": "default"})
    st.append("round", {"round": 1, "verdict": "archive"})
    gateway = Gateway(GatewayConfig(dataset=_dataset(tmp_path), state=tmp_path / "gw",
                                    policy=default_policy(), campaigns=camps))
    got = gateway.call(local_grant(), "campaign_status", {"campaign": "c1"})
    assert got["definition"] == NAME and got["rounds"] == 1
    assert got["last_rounds"] == [{"round": 1, "verdict": "archive"}]
    other = AgentGrant(id="b", token_sha256="sha256:" + "1" * 64, definitions=["softmax_*"])
    for grant, name in ((other, "c1"), (local_grant(), "../c1"), (local_grant(), "c2")):
        with pytest.raises(Refused, match="campaign"):
            gateway.call(grant, "campaign_status", {"campaign": name})
