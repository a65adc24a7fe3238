"""GPU lanes, simulated on CPU: a timed batch has its GPU to itself; candidates spread over GPUs."""

from __future__ import annotations

import threading
import time

from sandboxharness.stages.lanes import NO_LANE, GpuLane, Lanes


def _wait_for(cond, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.005)


def test_exclusive_waits_for_every_shared_holder_and_keeps_new_ones_out() -> None:
    lane = GpuLane(0)
    events: list[str] = []
    release_a, release_b = threading.Event(), threading.Event()

    def holder(name: str, release: threading.Event) -> None:
        with lane.shared():
            events.append(f"{name}+")
            release.wait(5)
            events.append(f"{name}-")

    def timer() -> None:
        with lane.exclusive():
            events.append("T+")
            time.sleep(0.05)
            events.append("T-")

    def late() -> None:
        with lane.shared():
            events.append("late+")

    a = threading.Thread(target=holder, args=("a", release_a))
    b = threading.Thread(target=holder, args=("b", release_b))
    a.start()
    b.start()
    _wait_for(lambda: lane.state()[0] == 2)
    t = threading.Thread(target=timer)
    t.start()
    _wait_for(lambda: lane.state()[2] == 1)  # the timed batch waits
    c = threading.Thread(target=late)
    c.start()
    time.sleep(0.05)
    assert "late+" not in events  # writer preferred: no new shared holder while it waits
    release_a.set()
    time.sleep(0.05)
    assert "T+" not in events  # b still holds the lane
    release_b.set()
    for th in (a, b, t, c):
        th.join(5)
    assert events.index("T+") > events.index("a-") and events.index("T+") > events.index("b-")
    assert events.index("T-") == events.index("T+") + 1  # nothing inside the window
    assert events.index("late+") > events.index("T-")


def test_shared_holders_run_together() -> None:
    lane = GpuLane(3)
    inside = threading.Barrier(4, timeout=5)

    def one() -> None:
        with lane.shared():
            inside.wait()  # all four inside at once, or the barrier times out

    threads = [threading.Thread(target=one) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(5)
    assert not inside.broken


def test_candidates_spread_over_eight_gpus_and_see_only_their_own() -> None:
    lanes = Lanes(range(8))
    placed = []
    with __import__("contextlib").ExitStack() as stack:
        for _ in range(16):
            placed.append(stack.enter_context(lanes.place()))
        assert sorted(g.index for g in placed) == sorted(list(range(8)) * 2)
        assert all(g.candidates == 2 for g in lanes.lanes)
    assert all(g.candidates == 0 for g in lanes.lanes)
    assert placed[0].env() == {"CUDA_VISIBLE_DEVICES": str(placed[0].index)}


def test_timing_on_one_gpu_does_not_wait_for_another() -> None:
    lanes = Lanes([0, 1])
    g0, g1 = lanes.lanes
    with g0.shared():
        done = threading.Event()

        def timed_on_1() -> None:
            with g1.exclusive():
                done.set()

        threading.Thread(target=timed_on_1).start()
        assert done.wait(2)


def test_no_lane_never_waits_and_selects_no_device() -> None:
    with NO_LANE.exclusive(), NO_LANE.exclusive(), NO_LANE.shared():
        pass
    assert NO_LANE.env() == {}
    with Lanes([]).place() as lane:
        assert lane is NO_LANE
