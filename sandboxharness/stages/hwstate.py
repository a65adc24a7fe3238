"""GPU hardware state around a timing window, read through NVML on the trusted host.

A timing is only as good as the GPU it ran on: a thermal or power-capped clock, or another
process sharing the device, makes an honest kernel look slow (or a baseline look fast). The
host samples clocks, power, temperature, the clock-event (throttle) reasons and the compute
processes on the device at the window's entry, every ``interval_s`` in between (a background
thread, a bounded number of samples) and at its exit; ``Window.summary()`` is a small
JSON-able dict with a one-line ``flag``.

Where NVML (the ``pynvml`` module of ``nvidia-ml-py``) or the device is unavailable nothing
raises: ``HwState.open`` returns None, ``unavailable_reason()`` says why, and a window over no
state summarises as ``{"available": false, "reason": ...}``. pynvml is imported lazily, so
this module imports everywhere.

Pids are the ones NVML reports: on current drivers those of the caller's pid namespace. The
harness's own pid is allowed exactly; a pid in ``allowed_pids`` is allowed with its
descendants, because a sandboxed job's GPU process is a grandchild of the launcher the host
started (``sandbox/_nsinit.py`` forks into the new pid namespace).
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any, Protocol

from ..errors import InfrastructureError

THROTTLE_REASONS: dict[int, str] = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x200: "board_limit",
    0x400: "reliability",
}
"""NVML clock-event bits that slow a running kernel. Left out on purpose: gpu_idle (0x1, not
a throttle), applications_clocks (0x2) and display_clock (0x100), which are settings rather
than slowdowns, and bits this table does not know."""

DEFAULT_INTERVAL_S = 0.05
DEFAULT_MAX_SAMPLES = 2000  # 100 s at the default interval; entry and exit always sampled
_MAX_PIDS_LISTED = 64  # keeps the summary small whatever the device hosts
_MAX_ANCESTRY = 64
_FIELDS = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c", "throttle_mask", "pids")


@dataclass(frozen=True)
class HwSample:
    """One NVML reading of one GPU. A field is None where NVML could not read it."""

    t: float
    """``time.monotonic()`` when the reading started."""
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    throttle_mask: int | None
    """NVML's current clock-event (throttle) reasons bitmask."""
    pids: tuple[int, ...] | None
    """Compute processes on the device (``nvmlDeviceGetComputeRunningProcesses``)."""

    @property
    def throttled(self) -> tuple[str, ...]:
        return decode_throttle(self.throttle_mask or 0)


def decode_throttle(mask: int) -> tuple[str, ...]:
    """The timing-relevant reasons set in ``mask``, in bit order."""
    return tuple(name for bit, name in sorted(THROTTLE_REASONS.items()) if mask & bit)


def _span(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if known else (None, None)


def _flag(throttled: Sequence[str], foreign: Sequence[int]) -> str | None:
    parts = []
    if throttled:
        parts.append(f"GPU throttled ({', '.join(throttled)})")
    if foreign:
        shown = ", ".join(str(p) for p in foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        noun = "process" if len(foreign) == 1 else "processes"
        parts.append(f"{len(foreign)} foreign {noun} on the GPU (pid {shown})")
    return " and ".join(parts) + " during the timing window" if parts else None


def summarize(samples: Sequence[HwSample], allowed: Collection[int], *,
              truncated: bool = False) -> dict[str, Any]:
    """The window's summary from its samples; a pid not in ``allowed`` is foreign."""
    sm = _span(s.sm_clock_mhz for s in samples)
    mem = _span(s.mem_clock_mhz for s in samples)
    power = _span(s.power_w for s in samples)[1]
    temp = _span(s.temperature_c for s in samples)[1]
    masks = [s.throttle_mask for s in samples if s.throttle_mask is not None]
    throttled = list(decode_throttle(_or_all(masks)))
    foreign = sorted({p for s in samples for p in s.pids or () if p not in allowed})
    return {
        "available": True,
        "samples": len(samples),
        "duration_s": round(samples[-1].t - samples[0].t, 3) if samples else 0.0,
        "sm_clock_mhz_min": sm[0], "sm_clock_mhz_max": sm[1],
        "mem_clock_mhz_min": mem[0], "mem_clock_mhz_max": mem[1],
        "power_w_max": None if power is None else round(power, 1),
        "temperature_c_max": temp,
        "throttled": throttled,
        "foreign_processes": foreign[:_MAX_PIDS_LISTED],
        "unreadable": [f for f in _FIELDS if samples and all(getattr(s, f) is None
                                                            for s in samples)],
        "truncated": truncated,
        "flag": _flag(throttled, foreign) if samples else "no GPU state sampled",
    }


def _or_all(masks: Iterable[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def unavailable_summary(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


def descends_from(pid: int, roots: Collection[int], *, proc: str = "/proc") -> bool:
    """Whether ``pid`` is one of ``roots`` or below one of them (parent links in /proc)."""
    for _ in range(_MAX_ANCESTRY):
        if pid in roots:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"{proc}/{pid}/status", encoding="utf-8") as f:
                ppid = next((int(line.split()[1]) for line in f if line.startswith("PPid:")), 0)
        except (OSError, ValueError, IndexError):
            return False  # gone, or not in our pid namespace: cannot be vouched for
        pid = ppid
    return False


# --- NVML: initialised once per process; pynvml has no stubs, so it stays Any-typed here ---

_lock = threading.Lock()
_nvml: ModuleType | None = None
_init_error: str | None = None  # why NVML cannot be used in this process (kept once found)
_last_reason: str | None = None


def _errors(nv: ModuleType) -> tuple[type[BaseException], ...]:
    """What pynvml raises when NVML cannot answer (its mismatch error is no NVMLError)."""
    found = (getattr(nv, "NVMLError", None), getattr(nv, "NVMLLibraryMismatchError", None))
    return (*(e for e in found if isinstance(e, type) and issubclass(e, BaseException)), OSError)


def _load() -> ModuleType | str:
    """The initialised pynvml module, or why there is none."""
    global _nvml, _init_error
    with _lock:
        if _nvml is None and _init_error is None:
            try:
                nv = importlib.import_module("pynvml")
            except ImportError as e:
                _init_error = f"pynvml not installed (nvidia-ml-py): {e}"
                return _init_error
            try:
                nv.nvmlInit()
                _nvml = nv
            except _errors(nv) as e:
                _init_error = f"NVML init failed: {e}"
        return _nvml if _nvml is not None else str(_init_error)


def driver_version() -> str | None:
    """The NVIDIA driver's version (every GPU number is tied to it), or None without NVML."""
    nv = _load()
    if isinstance(nv, str):
        return None
    try:
        v = nv.nvmlSystemGetDriverVersion()
    except _errors(nv):
        return None
    return v.decode() if isinstance(v, bytes) else str(v)


def unavailable_reason() -> str | None:
    """Why the most recent ``HwState.open`` returned None; None after one that succeeded."""
    return _last_reason


class HwState:
    """One GPU, by NVML index; ``sample()`` may be called from any thread."""

    def __init__(self, nv: ModuleType, handle: Any, index: int) -> None:
        self._nv = nv
        self._handle = handle
        self._errors = _errors(nv)
        self.index = index

    @classmethod
    def open(cls, index: int) -> HwState | None:
        """The device at NVML ``index`` (PCI order, not CUDA_VISIBLE_DEVICES order), or None."""
        global _last_reason
        nv = _load()
        if isinstance(nv, str):
            _last_reason = nv
            return None
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
        except _errors(nv) as e:
            _last_reason = f"NVML device {index} unavailable: {e}"
            return None
        _last_reason = None
        return cls(nv, handle, index)

    def _read(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self._nv, fn)(self._handle, *args)
        except self._errors:
            return None  # unsupported or momentarily unreadable: the field stays unknown

    def _mask(self) -> int | None:
        # the clock-event name since NVML 12.2; the deprecated throttle name for older drivers
        for fn in ("nvmlDeviceGetCurrentClocksEventReasons",
                   "nvmlDeviceGetCurrentClocksThrottleReasons"):
            value = self._read(fn) if hasattr(self._nv, fn) else None
            if value is not None:
                return int(value)
        return None

    def sample(self) -> HwSample:
        t = time.monotonic()
        nv = self._nv
        sm = self._read("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        mem = self._read("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_MEM)
        mw = self._read("nvmlDeviceGetPowerUsage")
        temp = self._read("nvmlDeviceGetTemperature", nv.NVML_TEMPERATURE_GPU)
        procs = self._read("nvmlDeviceGetComputeRunningProcesses")
        return HwSample(t=t, sm_clock_mhz=None if sm is None else int(sm),
                        mem_clock_mhz=None if mem is None else int(mem),
                        power_w=None if mw is None else int(mw) / 1000.0,
                        temperature_c=None if temp is None else int(temp),
                        throttle_mask=self._mask(),
                        pids=None if procs is None else tuple(sorted(int(p.pid) for p in procs)))

    def window(self, allowed_pids: Iterable[int] = (), *, interval_s: float = DEFAULT_INTERVAL_S,
               max_samples: int = DEFAULT_MAX_SAMPLES) -> Window:
        return Window(self, allowed_pids, interval_s=interval_s, max_samples=max_samples)


def open_window(index: int, allowed_pids: Iterable[int] = (), *,
                interval_s: float = DEFAULT_INTERVAL_S,
                max_samples: int = DEFAULT_MAX_SAMPLES) -> Window:
    """A window on NVML device ``index``; one that samples nothing where NVML is unavailable."""
    state = HwState.open(index)
    return Window(state, allowed_pids, interval_s=interval_s, max_samples=max_samples,
                  reason=unavailable_reason())


class Sampler(Protocol):
    def sample(self) -> HwSample: ...


class Window:
    """``with state.window(pids) as w: ...`` then ``w.summary()``; over no state (None) it
    samples nothing and summarises as unavailable."""

    def __init__(self, state: Sampler | None, allowed_pids: Iterable[int] = (), *,
                 interval_s: float = DEFAULT_INTERVAL_S, max_samples: int = DEFAULT_MAX_SAMPLES,
                 reason: str | None = None) -> None:
        if interval_s <= 0 or max_samples < 2:
            raise ValueError("interval_s must be > 0 and max_samples >= 2")
        self._state = state
        self._reason = reason or "NVML unavailable"
        self._roots = frozenset(int(p) for p in allowed_pids)
        self._allowed = set(self._roots) | {os.getpid()}
        self._foreign: set[int] = set()
        self._interval = interval_s
        self._max = max_samples
        self._samples: list[HwSample] = []
        self._truncated = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def samples(self) -> tuple[HwSample, ...]:
        with self._lock:
            return tuple(self._samples)

    def _take(self, state: Sampler, *, last: bool = False) -> bool:
        """Record one sample; False once the bound is reached (the exit sample always fits)."""
        with self._lock:
            if len(self._samples) >= self._max - (0 if last else 1):
                self._truncated = True
                return False
        s = state.sample()
        # ancestry is resolved now: the process may be gone by summary(); a pid found foreign
        # stays foreign (its parents can only be reaped, never become a job's)
        fresh = [p for p in s.pids or () if p not in self._allowed and p not in self._foreign]
        mine = {p for p in fresh if descends_from(p, self._roots)}
        with self._lock:
            self._allowed |= mine
            self._foreign.update(p for p in fresh if p not in mine)
            self._samples.append(s)
        return True

    def _loop(self, state: Sampler) -> None:
        try:
            while not self._stop.wait(self._interval) and self._take(state):
                pass
        except BaseException as e:  # noqa: BLE001 - handed to the main thread at exit
            self._error = e

    def __enter__(self) -> Window:
        if self._thread is not None or self._samples:
            raise RuntimeError("a Window is entered once")
        if self._state is not None:
            self._take(self._state)
            self._thread = threading.Thread(target=self._loop, args=(self._state,),
                                            name="hwstate-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:  # never masks the body's own exception
            if exc is None:
                raise InfrastructureError(f"GPU state sampler failed: {self._error!r}") \
                    from self._error
            return
        self._take(self._state, last=True)

    def summary(self) -> dict[str, Any]:
        if self._state is None:
            return unavailable_summary(self._reason)
        with self._lock:
            samples, allowed = list(self._samples), frozenset(self._allowed)
        return summarize(samples, allowed, truncated=self._truncated)
