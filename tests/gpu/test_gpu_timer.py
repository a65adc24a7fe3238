"""The stage's GPU timer on real hardware: do_bench's figure for honest single-stream work
(with CUPTI; without, never below it), and never fooled by work on another stream, with
CUPTI and with the no-CUPTI fallback."""

from __future__ import annotations

import statistics

import pytest

from sandboxharness.worker.gputimer import GpuTimer
from sandboxharness.worker.protocol import NO_CUPTI_ENV

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _median_ms(timer: GpuTimer, calls: list) -> tuple[float, float, dict]:
    _, times, info = timer.time_calls(calls)
    return (statistics.median(times) * 1e3, statistics.median(info["stream_s"]) * 1e3, info)


@pytest.fixture(params=["cupti", "fallback"])
def timer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> GpuTimer:
    if request.param == "fallback":
        monkeypatch.setenv(NO_CUPTI_ENV, "1")
    t = GpuTimer()
    t.time_calls([lambda: None])
    if request.param == "cupti" and not t.cupti:
        pytest.skip(f"CUPTI unavailable here: {t.trace_error}")
    return t


def test_single_stream_kernel_reads_as_do_bench(timer: GpuTimer) -> None:
    import triton.testing

    x = torch.randn(1 << 26, device="cuda")  # 256 MiB in, 256 MiB out: ~0.1 ms on an H200
    y = torch.empty_like(x)
    ours, stream, _ = _median_ms(timer, [lambda: torch.mul(x, 2.0, out=y)] * 40)
    ref = triton.testing.do_bench(lambda: torch.mul(x, 2.0, out=y), return_mode="median")
    if timer.cupti:
        assert ours == pytest.approx(ref, rel=0.08), (ours, stream, ref, timer.method)
    else:  # no pad without CUPTI: the host's launch latency counts; never below do_bench
        assert ref * 0.95 <= ours <= ref * 2.0, (ours, stream, ref, timer.method)


@pytest.mark.parametrize("size", ["large", "tiny"])
def test_work_on_a_private_stream_is_counted(timer: GpuTimer, size: str) -> None:
    if size == "large":  # ~0.3 ms of matmuls: plain stream events would see next to nothing
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        work = lambda: [torch.matmul(a, a) for _ in range(4)]  # noqa: E731
    else:  # a few us: the events' own cost must not become the trick's gain
        x = torch.randn(1024, device="cuda")
        y = torch.empty_like(x)
        work = lambda: torch.mul(x, 2.0, out=y)  # noqa: E731
    side = torch.cuda.Stream()

    def on_side() -> None:
        with torch.cuda.stream(side):
            work()

    honest, _, _ = _median_ms(timer, [work] * 20)
    hidden, stream, info = _median_ms(timer, [on_side] * 20)
    assert hidden >= 0.85 * honest, (size, hidden, honest, stream, info["method"])
    if size == "large":
        assert stream < 0.25 * honest, "plain stream events must miss the side stream here"
        assert info["other_streams_longer"] >= 15


def test_switching_cupti_off_is_reported(timer: GpuTimer) -> None:
    """A candidate that turns tracing off must not get plain events back quietly."""
    if not timer.cupti:
        pytest.skip("CUPTI path only")
    from cupti import cupti

    def sabotage() -> None:
        for kind in ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET"):
            cupti.activity_disable(getattr(cupti.ActivityKind, kind))

    _, _, info = timer.time_calls([sabotage] + [lambda: None] * 3)
    assert info["trace_lost"] >= 3 or info["off_stream_calls"] >= 3, info
