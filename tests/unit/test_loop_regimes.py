"""The regime matrix: groups by variable axes, latency shares, explicit heavy regimes."""

from __future__ import annotations

from sandboxharness.loop.regimes import boundary_workloads, build_regimes
from sandboxharness.models import Definition, WorkloadTrace
from sandboxharness.policy.campaign import RegimeRules

DEF = Definition.model_validate({
    "name": "rms", "op_type": "rmsnorm",
    "axes": {"batch": {"type": "var"}, "h": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["batch", "h"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["batch", "h"], "dtype": "float32"}},
    "reference": "def run(x):\n    return x\n"})


def wl(uuid: str, batch: int) -> WorkloadTrace:
    return WorkloadTrace.model_validate({"definition": "rms", "workload": {
        "uuid": uuid, "axes": {"batch": batch}, "inputs": {"x": {"type": "random"}}}})


BATCHES = [1, 2, 4, 7, 512, 1024, 8192, 14509]
WLS = [wl(f"w{b}", b) for b in BATCHES]


def test_values_split_at_the_widest_log_gaps() -> None:
    m = build_regimes(DEF, WLS, None, RegimeRules())
    assert m.var_axes == ["batch"]
    assert [r.axes["batch"] for r in m.regimes] == [[1, 7], [512, 1024], [8192, 14509]]
    assert m.screening == [r.name for r in m.regimes]  # small definition: every regime
    assert m.screening_workloads() == [w.workload.uuid for w in WLS]


def test_shares_follow_latency_and_a_heavy_workload_is_kept_explicit() -> None:
    lat = {f"w{b}": b / 100 + 1.0 for b in BATCHES}  # 14509 carries ~0.5 of the total
    m = build_regimes(DEF, WLS, lat, RegimeRules())
    assert abs(sum(r.share for r in m.regimes) - 1.0) < 1e-9
    heavy = [r for r in m.regimes if r.explicit]
    assert [r.workloads for r in heavy] == [["w14509"]] and heavy[0].name == "batch=14509"
    assert any(r.workloads == ["w8192"] for r in m.regimes)  # its group keeps the rest


def test_the_representative_is_nearest_the_regime_median() -> None:
    lat = {"w1": 1.0, "w2": 2.0, "w4": 3.0, "w7": 10.0, "w512": 50, "w1024": 60,
           "w8192": 70, "w14509": 80}
    m = build_regimes(DEF, WLS, lat, RegimeRules(explicit_share=1.0))
    small = m.regimes[0]
    assert small.workloads == ["w1", "w2", "w4", "w7"] and small.representative in ("w2", "w4")


def test_a_large_definition_screens_on_a_few_representative_regimes() -> None:
    many = [wl(f"u{i}", b) for i, b in enumerate(
        [1 + i for i in range(20)] + [300 + i for i in range(15)] + [5000 + i for i in range(10)]
        + [60000 + i for i in range(5)])]
    rules = RegimeRules(large_definition=40, screening_regimes=2, max_bins_per_axis=4)
    m = build_regimes(DEF, many, None, rules)
    assert len(m.regimes) == 4 and len(m.screening) == 2
    reps = m.screening_workloads()
    assert len(reps) == 2 and not m.is_full(reps) and m.is_full(m.all_workloads())


def test_boundary_shapes_are_each_axis_extremes() -> None:
    m = build_regimes(DEF, WLS, None, RegimeRules())
    assert boundary_workloads(m, WLS) == ["w1", "w14509"]


def test_no_variable_axis_is_one_regime() -> None:
    m = build_regimes(DEF, [wl("a", 8), wl("b", 8)], None, RegimeRules())
    assert [r.name for r in m.regimes] == ["all"] and m.regimes[0].workloads == ["a", "b"]
