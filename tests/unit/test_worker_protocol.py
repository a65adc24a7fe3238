"""The host-worker contract (``worker.protocol``): frames as they were before the ops were
typed (an image built from older sources keeps working), hostile replies reduced to
well-typed values, and the import boundary of what the worker image ships."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest
import torch

from sandboxharness.models import Solution
from sandboxharness.stages.client import hello_for_baseline, hello_for_candidate, hello_for_reference
from sandboxharness.worker import protocol as p
from tests.conftest import TRITON_RMS, make_solution

PKG = Path(__file__).resolve().parents[2] / "sandboxharness"
JOB = {"src": "/job/src", "data": "/job/data", "out": "/job/out", "device": "cpu"}
CASE = {"inputs": [{"name": "x", "dtype": "float32", "shape": [2]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [2]}]}


def _hello_dicts() -> list[tuple[p.Hello, dict[str, object]]]:
    sol = Solution.model_validate(make_solution(TRITON_RMS))
    return [
        (hello_for_candidate(sol),
         {"role": "candidate", "entry_file": "kernel.py", "entry_func": "run", "dps": True,
          "preload_triton": True, "language": "triton", "build_key": sol.content_hash()}),
        (hello_for_reference(),
         {"role": "reference", "entry_file": "reference.py", "entry_func": "run", "dps": False,
          "preload_triton": False}),
        (hello_for_baseline("baseline.py", env_in_out={"FLASHINFER_WORKSPACE_BASE": "ws"}),
         {"role": "baseline", "entry_file": "baseline.py", "entry_func": "run", "dps": False,
          "preload_triton": False, "language": "python",
          "env_in_out": {"FLASHINFER_WORKSPACE_BASE": "ws"}}),
    ]


@pytest.mark.parametrize("hello,before", _hello_dicts())
def test_hello_frames_are_the_ones_sent_before(hello: p.Hello, before: dict[str, object]) -> None:
    wire = hello.for_job(**JOB).to_wire()
    assert p.encode(wire) == p.encode({**before, "op": "hello", **JOB})
    assert p.Hello.from_wire(wire) == hello.for_job(**JOB)


def test_request_frames_are_the_ones_sent_before() -> None:
    call = p.Call(CASE, 7, "/job/out/w_t0.safetensors")
    repeat = p.Repeat(tile=4, calls=3, tile_inputs=["x"], budget_s=5.0, tiled_case=CASE)
    pairs = [
        (call, {"op": "call", "case": CASE, "seed": 7, "save": "/job/out/w_t0.safetensors"}),
        (p.Sample(call, repeat),
         {"op": "sample", "case": CASE, "seed": 7, "save": "/job/out/w_t0.safetensors",
          "tile": 4, "calls": 3, "tile_inputs": ["x"], "budget_s": 5.0, "tiled_case": CASE}),
        (p.Recheck(), {"op": "recheck"}),
        (p.Prepare(CASE, 5, 11), {"op": "prepare", "case": CASE, "warmup": 5, "warmup_seed": 11}),
        (p.Timed([1, 2]), {"op": "timed", "seeds": [1, 2]}),
        (p.Dump([0, 2], ["/a", "/b"]), {"op": "dump", "indices": [0, 2], "paths": ["/a", "/b"]}),
        (p.Bye(), {"op": "bye"}),
    ]
    for req, before in pairs:
        assert p.encode(req.to_wire()) == p.encode(before), req
        assert p.request_from_wire(before) == req


def test_an_unknown_op_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown op 'exec'"):
        p.request_from_wire({"op": "exec"})
    with pytest.raises(ValueError, match="unknown op None"):
        p.request_from_wire({})


def test_worker_replies_and_frames_are_the_ones_sent_before() -> None:
    bound = {"out": "a" * 64, "in": "b" * 64}
    pairs = [
        (p.HelloReply(0.5), {"ok": True, "import_s": 0.5}),
        (p.HelloReply(0.5, {"cached": True}), {"ok": True, "import_s": 0.5,
                                               "build": {"cached": True}}),
        (p.CallReply([{"type": "torch.Tensor"}], 1, 0.1, bound, 2, {"in.x": "f"}),
         {"ok": True, "outputs": [{"type": "torch.Tensor"}], "n_outputs": 1, "elapsed_s": 0.1,
          "bound": bound, "launches": 2, "pre": {"in.x": "f"}}),
        (p.RecheckReply({"/job/out/x": "c"}), {"ok": True, "digests": {"/job/out/x": "c"}}),
        (p.TimedReply([0.1], ["d"]), {"ok": True, "times_s": [0.1], "re_out": ["d"]}),
        (p.TimedReply([0.1], ["d"], {"method": "events"}),
         {"ok": True, "times_s": [0.1], "clock": {"method": "events"}, "re_out": ["d"]}),
        (p.DumpReply([bound]), {"ok": True, "bound": [bound]}),
        (p.Ack(), {"ok": True}),
        (p.Progress(p.Step.BOUND, digests=bound), {"progress": True, "stage": "bound", **bound}),
        (p.Progress(p.Step.READY, 0, {"in": "e"}),
         {"progress": True, "stage": "ready", "i": 0, "in": "e"}),
        (p.Progress(p.Step.DONE, 0, launches=None),
         {"progress": True, "stage": "done", "i": 0, "launches": None}),
        (p.Progress(p.Step.BOUND, 1, bound, described=[]),
         {"progress": True, "stage": "bound", "i": 1, "described": [], **bound}),
    ]
    for reply, before in pairs:
        assert p.encode(reply.to_wire()) == p.encode(before), reply
        assert type(reply).from_wire(before) == reply


def test_hostile_replies_keep_only_well_typed_values() -> None:
    call = p.CallReply.from_wire({"ok": True, "outputs": "x", "n_outputs": True,
                                  "elapsed_s": "1", "bound": {"out": 1, "in": "d", "rep": "r"},
                                  "launches": -1})
    assert call == p.CallReply([], None, None, {"in": "d"}, None)
    assert p.HelloReply.from_wire({"import_s": "slow", "build": []}) == p.HelloReply(0.0, None)
    assert p.TimedReply.from_wire({"times_s": {}, "re_out": "x", "clock": 3}) == p.TimedReply()
    assert p.DumpReply.from_wire({"bound": {}}).bound is None
    assert p.RecheckReply.from_wire({"digests": {"a": 1, "b": "c"}}).digests == {"b": "c"}
    frame = p.Progress.from_wire({"progress": True, "stage": 3, "i": "0", "described": {}})
    assert frame == p.Progress("3", None, {}, None, None)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in ``path``; level 0 is absolute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
        elif isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("package", ["worker", "inputs"])
def test_what_the_image_ships_imports_nothing_else_of_the_harness(package: str) -> None:
    """The image holds ``worker/`` and ``inputs/`` under a stub package root, nothing more
    (containers/build.sh): an import of any other harness module would fail there."""
    shipped = {"worker", "inputs"}
    for path in sorted((PKG / package).rglob("*.py")):
        for level, module in _imports(path):
            if level == 0:
                assert not module.startswith("sandboxharness") or \
                    module.split(".")[1] in shipped, (path.name, module)
            elif level >= 2:
                assert level == 2 and module.split(".")[0] in shipped, (path.name, level, module)


class _Frames:
    """A channel that only collects what the worker sends (progress frames)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []

    def send(self, msg: dict[str, object]) -> None:
        self.sent.append(msg)


class _StandInTimer:
    """The GPU timer's interface (``worker.gputimer.GpuTimer``), on the CPU."""

    def remember(self, inputs: object) -> None:
        pass

    def fresh(self, sets: object) -> None:
        pass

    def time_made(self, n: int, make, after):  # type: ignore[no-untyped-def]
        for i in range(n):
            after(i, make(i)())
        return None, [1e-3] * n, {"method": "stand-in"}


def test_worker_ops_answer_typed_replies_on_both_timing_paths(tmp_path: Path, tiny_def_path,
                                                               tiny_wl_path) -> None:
    """The worker driven in process, as the host drives it: hello, call, recheck, then a
    timed batch on the CPU path and on the GPU path (a stand-in timer), then a dump."""
    threads = torch.get_num_threads()
    try:
        _drive_worker(tmp_path, tiny_def_path, tiny_wl_path)
    finally:  # what the worker's serve loop would restore, and its hello changed
        gc.enable()
        torch.set_num_threads(threads)


def _drive_worker(tmp_path: Path, tiny_def_path: Path, tiny_wl_path: Path) -> None:
    from sandboxharness.intake import load_definition, load_workloads
    from sandboxharness.stages.cases import build_cases
    from sandboxharness.worker.runner import Worker
    from tests.conftest import fast_policy

    d = load_definition(tiny_def_path)
    case = build_cases(d, load_workloads(tiny_wl_path), fast_policy())[0]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "reference.py").write_text(d.reference)
    chan = _Frames()
    worker = Worker(chan)  # type: ignore[arg-type]
    hello = hello_for_reference().for_job(src=str(tmp_path / "src"), data=str(tmp_path),
                                          out=str(tmp_path), device="cpu")
    assert worker.op_hello(hello).import_s >= 0
    call = worker.op_call(p.Call(case.payload, 1, str(tmp_path / "c.safetensors")))
    assert call.n_outputs == 1 and call.outputs[0]["type"] == "torch.Tensor"
    assert set(call.bound) == {"out", "in", "in.x", "in.w"}
    assert call.pre == {k: v for k, v in call.bound.items() if k.startswith("in.")}
    from safetensors.torch import load_file

    # inputs the call left alone travel as digests only
    assert set(load_file(str(tmp_path / "c.safetensors"))) == {"out.y"}
    recheck = worker.op_recheck(p.Recheck())
    assert recheck.digests == {str(tmp_path / "c.safetensors"): call.bound["out"]}
    worker.op_prepare(p.Prepare(case.payload, 1, 2))
    for timer in (None, _StandInTimer()):
        chan.sent.clear()
        worker.gpu = timer
        timed = worker.op_timed(p.Timed([5, 6]))
        assert timed.times_s is not None and len(timed.times_s) == 2
        assert timed.re_out is not None and len(timed.re_out) == 2
        assert timed.clock == ({} if timer is None else {"method": "stand-in"})
        steps = [(f["stage"], f["i"]) for f in chan.sent]
        assert steps == [(s, i) for i in (0, 1) for s in ("ready", "done", "bound")]
        frames = [p.Progress.from_wire(f) for f in chan.sent]
        assert frames[2].digests["out"] == timed.re_out[0]
        assert frames[0].digests["in"] and frames[2].described
        path = tmp_path / f"b1_{'gpu' if timer else 'cpu'}.safetensors"
        dumped = worker.op_dump(p.Dump([1], [str(path)]))
        assert dumped.bound is not None and dumped.bound[0]["out"] == timed.re_out[1]
        assert dumped.bound[0] == p.Progress.from_wire(chan.sent[5]).digests
        assert frames[3].digests["in"] == frames[5].digests["in"]  # pre == post: unchanged
