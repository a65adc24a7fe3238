"""GPU hardware state around a timing window, on the CPU: the throttle decoding and the summary
from constructed samples, the window's bounds and pid accounting with a sampler of constructed
readings (real /proc ancestry, real threads), and NVML's absence answered without an exception."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandboxharness.errors import InfrastructureError
from sandboxharness.stages import hwstate
from sandboxharness.stages.hwstate import (
    HwSample,
    HwState,
    Window,
    decode_throttle,
    descends_from,
    summarize,
)


def _s(t: float = 0.0, *, sm: int | None = 1980, mem: int | None = 2619,
       power: float | None = 300.0, temp: int | None = 40, mask: int | None = 0,
       pids: tuple[int, ...] | None = ()) -> HwSample:
    return HwSample(t=t, sm_clock_mhz=sm, mem_clock_mhz=mem, power_w=power, temperature_c=temp,
                    throttle_mask=mask, pids=pids)


# --- decoding -------------------------------------------------------------------------------

def test_decode_names_the_timing_reasons_in_bit_order() -> None:
    assert decode_throttle(0x40 | 0x4) == ("sw_power_cap", "hw_thermal")
    assert decode_throttle(0x8 | 0x10 | 0x20 | 0x80) == ("hw_slowdown", "sync_boost",
                                                         "sw_thermal", "hw_power_brake")
    assert decode_throttle(0x200 | 0x400) == ("board_limit", "reliability")


def test_idle_and_settings_are_not_throttles() -> None:
    assert decode_throttle(0) == ()
    assert decode_throttle(0x1) == ()  # gpu idle
    assert decode_throttle(0x2 | 0x100) == ()  # applications / display clock settings
    assert decode_throttle(0x1 | 0x20) == ("sw_thermal",)
    assert decode_throttle(1 << 40) == ()  # a bit NVML may add later


def test_sample_decodes_its_own_mask() -> None:
    assert _s(mask=0x41).throttled == ("hw_thermal",)
    assert _s(mask=None).throttled == ()


# --- summary --------------------------------------------------------------------------------

def test_clean_window_has_no_flag_and_is_json() -> None:
    me = os.getpid()
    samples = [_s(10.0, sm=1980, pids=(me,)), _s(10.05, sm=1755, power=650.25, temp=55,
                                                    pids=(me, 4242)), _s(10.1, mask=0x1)]
    out = summarize(samples, {me, 4242})
    assert json.loads(json.dumps(out)) == out
    assert out["available"] is True and out["samples"] == 3
    assert out["duration_s"] == pytest.approx(0.1)
    assert (out["sm_clock_mhz_min"], out["sm_clock_mhz_max"]) == (1755, 1980)
    assert (out["mem_clock_mhz_min"], out["mem_clock_mhz_max"]) == (2619, 2619)
    assert out["power_w_max"] == pytest.approx(650.2, abs=0.06)
    assert out["temperature_c_max"] == 55
    assert out["throttled"] == [] and out["foreign_processes"] == []
    assert out["unreadable"] == [] and out["truncated"] is False
    assert out["flag"] is None


def test_thermal_throttle_in_one_sample_flags_the_window() -> None:
    out = summarize([_s(0.0), _s(0.05, mask=0x40), _s(0.1, mask=0x4 | 0x1)], set())
    assert out["throttled"] == ["sw_power_cap", "hw_thermal"]
    assert out["flag"] == "GPU throttled (sw_power_cap, hw_thermal) during the timing window"


def test_foreign_processes_are_every_pid_outside_the_allowed() -> None:
    out = summarize([_s(0.0, pids=(1, 7)), _s(0.1, pids=(7, 9, 3))], {7})
    assert out["foreign_processes"] == [1, 3, 9]
    assert out["flag"] == "3 foreign processes on the GPU (pid 1, 3, 9) during the timing window"
    one = summarize([_s(pids=(5,))], set())
    assert one["flag"] == "1 foreign process on the GPU (pid 5) during the timing window"


def test_flag_names_both_problems_on_one_line() -> None:
    out = summarize([_s(pids=tuple(range(100, 108)), mask=0x20)], set())
    flag = out["flag"]
    assert "\n" not in flag
    assert flag.startswith("GPU throttled (sw_thermal) and 8 foreign processes")
    assert "(pid 100, 101, 102, 103, 104, ...)" in flag


def test_unreadable_fields_are_named_not_guessed() -> None:
    out = summarize([_s(power=None, pids=None), _s(0.1, power=None, mask=None)], set())
    assert out["power_w_max"] is None
    assert out["unreadable"] == ["power_w"]  # pids and mask were read in one sample each
    none = summarize([_s(sm=None, mem=None, power=None, temp=None, mask=None, pids=None)], set())
    assert none["unreadable"] == ["sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c",
                                  "throttle_mask", "pids"]
    assert none["sm_clock_mhz_min"] is None and none["flag"] is None


def test_no_samples_is_said() -> None:
    out = summarize([], set())
    assert out["samples"] == 0 and out["flag"] == "no GPU state sampled"


def test_summary_stays_small_with_many_processes() -> None:
    out = summarize([_s(pids=tuple(range(10, 1010)))], set())
    assert len(out["foreign_processes"]) == 64
    assert len(json.dumps(out)) < 1500


# --- process ancestry -----------------------------------------------------------------------

def test_a_child_descends_from_us_and_an_orphan_does_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    # the middle process exits at once: its child is reparented away from us
    orphan = subprocess.run(
        [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, "
         "'-c', 'import time; time.sleep(30)'], stdout=subprocess.DEVNULL, "
         "stderr=subprocess.DEVNULL); print(p.pid)"],
        capture_output=True, text=True, check=True, timeout=30)
    opid = int(orphan.stdout)
    try:
        assert descends_from(child.pid, {os.getpid()})
        assert descends_from(child.pid, {child.pid})
        assert not descends_from(opid, {os.getpid()})
        assert not descends_from(os.getpid(), {child.pid})
        assert not descends_from(2**22 + 12345, {os.getpid()})  # no such process
    finally:
        child.kill()
        child.wait()
        os.kill(opid, 9)


def test_ancestry_reads_the_given_proc(tmp_path: Path) -> None:
    for pid, ppid in ((30, 20), (20, 10), (10, 1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(f"Name:\tx\nPPid:\t{ppid}\n")
    assert descends_from(30, {10}, proc=str(tmp_path))
    assert not descends_from(30, {11}, proc=str(tmp_path))
    (tmp_path / "40").mkdir()
    (tmp_path / "40" / "status").write_text("PPid:\tnot-a-number\n")
    assert not descends_from(40, {1}, proc=str(tmp_path))


# --- the window, over a sampler of constructed readings -------------------------------------

class Readings:
    """Stands in for NVML: returns the next scripted reading, stamped now (thread-safe)."""

    def __init__(self, pids: tuple[int, ...] = (), *, fail_after: int | None = None) -> None:
        self.pids = pids
        self.calls = 0
        self.fail_after = fail_after
        self._lock = threading.Lock()

    def sample(self) -> HwSample:
        with self._lock:
            self.calls += 1
            if self.fail_after is not None and self.calls > self.fail_after:
                raise RuntimeError("sampler broke")
            return _s(time.monotonic(), pids=self.pids)


def test_window_samples_at_entry_exit_and_between() -> None:
    r = Readings()
    with Window(r, interval_s=0.01) as w:
        time.sleep(0.15)
    out = w.summary()
    assert out["samples"] == r.calls >= 5
    assert out["duration_s"] >= 0.14
    ts = [s.t for s in w.samples]
    assert ts == sorted(ts)


def test_short_window_still_has_two_samples() -> None:
    with Window(Readings(), interval_s=10.0) as w:
        pass
    assert w.summary()["samples"] == 2


def test_sample_count_is_bounded_and_exit_always_sampled() -> None:
    r = Readings()
    with Window(r, interval_s=0.001, max_samples=5) as w:
        time.sleep(0.2)
    assert len(w.samples) == 5 and r.calls == 5
    assert w.summary()["truncated"] is True
    assert w.samples[-1].t - w.samples[-2].t >= 0.1  # the last one is the exit's


def test_own_pid_job_pids_and_their_children_are_allowed() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        r = Readings(pids=(os.getpid(), 4_000_000, child.pid))
        with Window(r, [4_000_000], interval_s=0.01) as w:
            pass
        assert w.summary()["foreign_processes"] == [child.pid]  # our child, not the job's
        with Window(r, [os.getpid()], interval_s=0.01) as w2:  # named as a job: its tree counts
            pass
        assert w2.summary()["foreign_processes"] == [4_000_000]
    finally:
        child.kill()
        child.wait()


def test_a_broken_sampler_is_a_harness_error() -> None:
    with pytest.raises(InfrastructureError, match="sampler broke"), \
            Window(Readings(fail_after=1), interval_s=0.01):
        time.sleep(0.1)


def test_window_is_entered_once_and_checks_its_options() -> None:
    w = Window(Readings())
    with w:
        pass
    with pytest.raises(RuntimeError), w:
        pass
    with pytest.raises(ValueError):
        Window(Readings(), interval_s=0)
    with pytest.raises(ValueError):
        Window(Readings(), max_samples=1)


# --- NVML absent ----------------------------------------------------------------------------

@pytest.fixture
def fresh_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget this process's NVML initialisation for one test."""
    monkeypatch.setattr(hwstate, "_nvml", None)
    monkeypatch.setattr(hwstate, "_init_error", None)
    monkeypatch.setattr(hwstate, "_last_reason", None)


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA GPU")
def test_without_a_gpu_open_is_none_with_a_reason(fresh_nvml: None) -> None:
    assert HwState.open(0) is None
    reason = hwstate.unavailable_reason()
    assert reason and ("NVML" in reason or "pynvml" in reason)
    assert HwState.open(0) is None and hwstate.unavailable_reason() == reason  # init once
    w = hwstate.open_window(0, [os.getpid()])
    with w:
        pass
    assert w.summary() == {"available": False, "reason": reason}


def test_without_pynvml_open_is_none_with_a_reason(fresh_nvml: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    assert HwState.open(3) is None
    assert "pynvml not installed" in (hwstate.unavailable_reason() or "")
    w = hwstate.open_window(3)
    with w:
        pass
    assert w.summary()["available"] is False


def test_importing_the_module_needs_no_pynvml() -> None:
    code = ("import sys; sys.modules['pynvml'] = None; "
            "import sandboxharness.stages.hwstate as h; print(h.decode_throttle(64))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "('hw_thermal',)"


def test_driver_version_without_nvml_is_none_not_an_error() -> None:
    """No GPU (CI): the verdict simply records no driver; nothing raises."""
    from sandboxharness.stages.hwstate import driver_version

    got = driver_version()
    assert got is None or (isinstance(got, str) and got[0].isdigit())
