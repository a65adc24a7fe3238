"""GPU hardware state on a real device: NVML read around a matmul loop gives live clocks and
power and several samples, sees this process as its own, and names a second process that
starts allocating on the GPU during the window as foreign."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

from sandboxharness.stages import hwstate
from sandboxharness.stages.hwstate import HwState

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed here")

# allocates on the GPU, says so, then holds its context until stdin closes
_OTHER = ("import sys, torch\n"
          "x = torch.ones(1 << 20, device='cuda')\n"
          "torch.cuda.synchronize()\n"
          "print('ready', flush=True)\n"
          "sys.stdin.readline()\n")


def _nvml_index_of_cuda0() -> int:
    """NVML numbers devices in PCI order, CUDA after CUDA_VISIBLE_DEVICES: match by UUID."""
    want = str(torch.cuda.get_device_properties(0).uuid).removeprefix("GPU-")
    pynvml.nvmlInit()  # reference-counted: the module's own init is unaffected
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            if uuid.removeprefix("GPU-") == want:
                return i
    finally:
        pynvml.nvmlShutdown()
    return 0


@pytest.fixture(scope="module")
def state() -> HwState:
    st = HwState.open(_nvml_index_of_cuda0())
    assert st is not None, hwstate.unavailable_reason()
    return st


def _matmuls(a: torch.Tensor, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()


def _start_other() -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    proc = subprocess.Popen([sys.executable, "-c", _OTHER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: lines.put(out.readline()), daemon=True).start()
    return proc, lines


def test_a_sample_reads_the_live_device(state: HwState) -> None:
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    s = state.sample()
    for _ in range(50):  # the driver may list a fresh context a moment late
        if s.pids and os.getpid() in s.pids:
            break
        time.sleep(0.1)
        s = state.sample()
    assert s.sm_clock_mhz and s.sm_clock_mhz > 0, s
    assert s.mem_clock_mhz and s.mem_clock_mhz > 0, s
    assert s.power_w and s.power_w > 0, s
    assert s.temperature_c and 0 < s.temperature_c < 120, s
    assert s.throttle_mask is not None, s
    assert s.pids is not None and os.getpid() in s.pids, (
        "NVML does not report this process by its own pid (pid namespace?)", os.getpid(), s)


def test_window_around_matmuls_names_a_second_process(state: HwState) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _matmuls(a, 0.2)  # warm: cuBLAS handle and workspace exist before the window
    proc = None
    try:
        with state.window([]) as w:
            _matmuls(a, 0.5)
            proc, lines = _start_other()
            deadline = time.monotonic() + 120  # torch import and CUDA init in a cold process
            while lines.empty() and time.monotonic() < deadline and proc.poll() is None:
                _matmuls(a, 0.2)
            assert not lines.empty() and lines.get() == "ready\n", "the second process failed"
            seen_until = time.monotonic() + 5
            while time.monotonic() < seen_until:
                if any(proc.pid in (s.pids or ()) for s in w.samples):
                    break
                _matmuls(a, 0.1)
            _matmuls(a, 0.2)
        out = w.summary()
        with state.window([proc.pid], interval_s=0.02) as w2:  # the same process, now allowed
            _matmuls(a, 0.2)
        out2 = w2.summary()
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=60)
    assert json.loads(json.dumps(out)) == out
    assert out["available"] is True and out["samples"] >= 2, out
    assert out["sm_clock_mhz_min"] > 0 and out["sm_clock_mhz_max"] >= out["sm_clock_mhz_min"]
    assert out["mem_clock_mhz_max"] > 0 and out["power_w_max"] > 0, out
    assert out["temperature_c_max"] > 0, out
    assert proc.pid in out["foreign_processes"], (proc.pid, os.getpid(), out)
    assert os.getpid() not in out["foreign_processes"], out
    assert out["flag"] and "foreign process" in out["flag"], out
    assert out["unreadable"] == [], out
    assert proc.pid not in out2["foreign_processes"] and out2["samples"] >= 2, out2


def test_a_missing_index_is_none_with_a_reason() -> None:
    assert HwState.open(4096) is None
    assert "4096" in (hwstate.unavailable_reason() or "")


def test_the_driver_version_is_read() -> None:
    """Every GPU verdict records the driver (environment.extra['driver'])."""
    from sandboxharness.stages.hwstate import driver_version

    got = driver_version()
    assert got is not None and got.split(".")[0].isdigit(), got
