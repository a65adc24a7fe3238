"""The host-worker contract: length-prefixed JSON frames on a private channel (never the
candidate's stdout), one typed request and reply per op, and the names both sides share.

The host trusts nothing a frame *claims*; frames only carry requests, metadata and raw
timings. Outputs travel as files and are judged on the host. So a request's ``from_wire``
(worker side) reads what the trusted host sent, while a reply's or progress frame's
``from_wire`` (host side) keeps only well-typed values and leaves the judging to the host.

Stdlib only: the worker image ships this package and nothing else of the harness.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, ClassVar

MAGIC = b"SHW1"
HEADER = 8
MAX_FRAME = 4 * 1024 * 1024

# -- names both sides use ---------------------------------------------------------------------
WORKER_MODULE = "sandboxharness.worker"
"""``python -I -m WORKER_MODULE`` is the worker (process backend, image entry point)."""
CHANNEL_ENV = "SHX_CHANNEL_FDS"
"""Set by the worker itself when it re-execs under compute-sanitizer: the channel's fds."""
SANITIZER_ENV = "SHX_SANITIZER_ARGV"
"""JSON argv of the tool that wraps the worker (compute-sanitizer, or ncu for the profile):
the worker becomes its child before taking the channel."""
NO_CUPTI_ENV = "SHX_NO_CUPTI"
"""``1``: time GPU calls without CUPTI (the device-sync floor only)."""
BUILD_ROOT = "shx-build"
"""Native builds: in ``$TMPDIR/shx-build/<key>`` (private scratch), published to
``<out>/shx-build/<key>`` for the host."""
COMPILE_LOG = "compile.log"
SANITIZER_LOG = "sanitizer.log"
"""compute-sanitizer's report, relative to the job's out directory."""


class ProtocolError(Exception):
    """A malformed or oversized frame."""


class Op(StrEnum):
    """The ops; the value is what travels in a request's ``op`` field."""

    HELLO = "hello"
    CALL = "call"
    SAMPLE = "sample"
    RECHECK = "recheck"
    PREPARE = "prepare"
    TIMED = "timed"
    DUMP = "dump"
    BYE = "bye"


class Step(StrEnum):
    """What a progress frame reports (``sample``: one ``bound``; ``timed``: all three per call)."""

    READY = "ready"
    DONE = "done"
    BOUND = "bound"


Digests = dict[str, str]
"""Digests of a call's tensors by group: ``out``, ``in`` (post-call inputs), ``rep`` (samples)."""
Payload = dict[str, Any]
"""A case as JSON (``stages.cases.Case.payload``): its inputs' and outputs' specs."""


# -- framing ----------------------------------------------------------------------------------
def encode(msg: Mapping[str, Any]) -> bytes:
    payload = json.dumps(msg, separators=(",", ":"), allow_nan=True).encode()
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME}")
    return MAGIC + len(payload).to_bytes(4, "big") + payload


def parse_header(header: bytes) -> int:
    if len(header) != HEADER or header[:4] != MAGIC:
        raise ProtocolError("bad frame header")
    size = int.from_bytes(header[4:], "big")
    if size > MAX_FRAME:
        raise ProtocolError(f"announced frame of {size} bytes exceeds {MAX_FRAME}")
    return size


def decode(payload: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("frame is not a JSON object")
    return msg


# -- reading what the worker claims (host side) -----------------------------------------------
def digests(raw: Any, groups: tuple[str, ...] = ("out", "in")) -> Digests:
    """The digest strings of ``raw`` (a reply's ``bound``, a frame), other values dropped; with
    ``in``, each input's own (``in.<name>``) too."""
    if not isinstance(raw, dict):
        return {}
    out = {k: raw[k] for k in groups if isinstance(raw.get(k), str)}
    if "in" in groups:
        out.update({k: v for k, v in raw.items() if isinstance(k, str) and k.startswith("in.")
                    and len(k) <= 256 and isinstance(v, str)})
    return out


def count(raw: Any) -> int | None:
    """A non-negative integer, or None (not counted, or not a count)."""
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def _number(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None


def _list(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else []


# -- requests (host -> worker) ----------------------------------------------------------------
@dataclass(frozen=True)
class Hello:
    """What the worker loads and how. The role's part is built once per role (see
    ``stages.client``); the job's part (paths, device) is added by ``for_job``."""

    OP: ClassVar[Op] = Op.HELLO
    role: str
    entry_file: str
    entry_func: str
    dps: bool
    preload_triton: bool
    language: str | None = None
    binding: str | None = None
    build_key: str | None = None
    env_in_out: Mapping[str, str] | None = None
    """Trusted baselines only: environment variables set to sub-directories of ``out``."""
    src: str = ""
    data: str = ""
    out: str = ""
    device: str = "cpu"

    @property
    def native(self) -> bool:
        return self.language in ("cuda", "cpp")

    def for_job(self, *, src: str, data: str, out: str, device: str) -> Hello:
        return replace(self, src=src, data=data, out=out, device=device)

    def to_wire(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": self.role, "entry_file": self.entry_file,
                               "entry_func": self.entry_func, "dps": self.dps,
                               "preload_triton": self.preload_triton}
        for key in ("language", "binding", "build_key"):
            if getattr(self, key) is not None:
                msg[key] = getattr(self, key)
        if self.env_in_out is not None:
            msg["env_in_out"] = dict(self.env_in_out)
        msg.update(op=self.OP.value, src=self.src, data=self.data, out=self.out,
                   device=self.device)
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Hello:
        env = msg.get("env_in_out")
        return cls(str(msg["role"]), str(msg["entry_file"]), str(msg["entry_func"]),
                   bool(msg["dps"]), bool(msg.get("preload_triton")),
                   language=_opt_str(msg.get("language")), binding=_opt_str(msg.get("binding")),
                   build_key=_opt_str(msg.get("build_key")),
                   env_in_out={str(k): str(v) for k, v in env.items()} if env else None,
                   src=str(msg.get("src", "")), data=str(msg.get("data", "")),
                   out=str(msg.get("out", "")), device=str(msg.get("device", "cpu")))


def _opt_str(raw: Any) -> str | None:
    return None if raw is None else str(raw)


@dataclass(frozen=True)
class Call:
    """One call on the inputs the worker makes from ``(case, seed)``; results saved to
    ``save`` and bound in the reply."""

    OP: ClassVar[Op] = Op.CALL
    case: Payload
    seed: int
    save: str
    profile: bool = False
    """GPU, under ncu: open the call with the marker kernel inside cudaProfilerStart/Stop, so
    the profiler measures this call's kernels only (``sandboxharness.profile``)."""

    def to_wire(self) -> dict[str, Any]:
        msg = {"op": self.OP.value, "case": self.case, "seed": self.seed, "save": self.save}
        return {**msg, "profile": True} if self.profile else msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Call:
        return cls(msg["case"], int(msg["seed"]), str(msg["save"]),
                   profile=msg.get("profile") is True)


@dataclass(frozen=True)
class Repeat:
    """How a ``sample`` request repeats its call: ``calls`` more calls on the batch tiled
    ``tile`` times (the inputs ``tile_inputs``), within ``budget_s``."""

    tile: int
    calls: int
    tile_inputs: list[str]
    budget_s: float
    tiled_case: Payload

    def to_wire(self) -> dict[str, Any]:
        return {"tile": self.tile, "calls": self.calls, "tile_inputs": self.tile_inputs,
                "budget_s": self.budget_s, "tiled_case": self.tiled_case}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Repeat:
        return cls(int(msg["tile"]), int(msg["calls"]),
                   [str(n) for n in msg.get("tile_inputs") or []],
                   float(msg.get("budget_s", 60.0)), msg["tiled_case"])


@dataclass(frozen=True)
class Sample:
    """A ``call`` (bound at once, in a ``bound`` progress frame), then its repeats."""

    OP: ClassVar[Op] = Op.SAMPLE
    call: Call
    repeat: Repeat

    def to_wire(self) -> dict[str, Any]:
        return {**self.call.to_wire(), "op": self.OP.value, **self.repeat.to_wire()}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Sample:
        return cls(Call.from_wire(msg), Repeat.from_wire(msg))


@dataclass(frozen=True)
class Recheck:
    """Digests of every earlier call's outputs, now."""

    OP: ClassVar[Op] = Op.RECHECK

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP.value}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Recheck:
        return cls()


@dataclass(frozen=True)
class Prepare:
    """The bench case of the next ``timed`` batch, and the warm-up calls before it."""

    OP: ClassVar[Op] = Op.PREPARE
    case: Payload
    warmup: int
    warmup_seed: int

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP.value, "case": self.case, "warmup": self.warmup,
                "warmup_seed": self.warmup_seed}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Prepare:
        return cls(msg["case"], int(msg.get("warmup", 0)), int(msg.get("warmup_seed", 0)))


@dataclass(frozen=True)
class Timed:
    """One timed call per seed on the prepared case (``ready``/``done``/``bound`` frames)."""

    OP: ClassVar[Op] = Op.TIMED
    seeds: list[int]

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP.value, "seeds": self.seeds}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Timed:
        return cls([int(s) for s in msg["seeds"]])


@dataclass(frozen=True)
class Dump:
    """Save the results of the timed calls ``indices`` of the last batch to ``paths``."""

    OP: ClassVar[Op] = Op.DUMP
    indices: list[int]
    paths: list[str]

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP.value, "indices": self.indices, "paths": self.paths}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Dump:
        return cls([int(i) for i in msg["indices"]], [str(p) for p in msg["paths"]])


@dataclass(frozen=True)
class Bye:
    """Leave: the worker answers ``ok`` and exits."""

    OP: ClassVar[Op] = Op.BYE

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.OP.value}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Bye:
        return cls()


Request = Hello | Call | Sample | Recheck | Prepare | Timed | Dump | Bye
REQUESTS: dict[Op, Any] = {r.OP: r for r in (Hello, Call, Sample, Recheck, Prepare, Timed,
                                              Dump, Bye)}
"""Op -> its request type (``from_wire``)."""


def request_from_wire(msg: Mapping[str, Any]) -> Request:
    try:
        op = Op(str(msg.get("op")))
    except ValueError:
        raise ValueError(f"unknown op {msg.get('op')!r}") from None
    req: Request = REQUESTS[op].from_wire(msg)
    return req


# -- replies (worker -> host) -----------------------------------------------------------------
# Every reply is ``{"ok": true, ...}`` or ``{"ok": false, "error": ..., "traceback": ...}``;
# after the hello the worker adds ``integrity`` (violations seen) and ``threads``. The session
# checks those; the types below are the fields of a successful reply.
@dataclass(frozen=True)
class Ack:
    """A reply with nothing but ``ok`` (prepare, bye)."""

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Ack:
        return cls()


@dataclass(frozen=True)
class HelloReply:
    import_s: float = 0.0
    build: dict[str, Any] | None = None
    """Native builds: the worker's account of the build (informational)."""

    def to_wire(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"ok": True, "import_s": self.import_s}
        if self.build is not None:
            msg["build"] = self.build
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> HelloReply:
        build = msg.get("build")
        return cls(_number(msg.get("import_s")) or 0.0, build if isinstance(build, dict) else None)


@dataclass(frozen=True)
class CallReply:
    """A ``call``'s or ``sample``'s reply: what came back, described, and its digests (read
    back: ``out``, ``in`` and each input's ``in.<name>``; a ``sample``'s ``rep`` is the client's
    to add)."""

    outputs: list[Any] = field(default_factory=list)
    """Each returned value described (``type``, and ``shape``/``dtype``/``device`` of a tensor)."""
    n_outputs: int | None = None
    elapsed_s: float | None = None
    bound: Digests = field(default_factory=dict)
    launches: int | None = None
    pre: Digests = field(default_factory=dict)
    """Each input's digest as made, before the call (``in.<name>``): the reference's are what
    the host holds a candidate's post-call inputs to."""

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "outputs": self.outputs, "n_outputs": self.n_outputs,
                "elapsed_s": self.elapsed_s, "bound": self.bound, "launches": self.launches,
                "pre": self.pre}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> CallReply:
        return cls(_list(msg.get("outputs")), count(msg.get("n_outputs")),
                   _number(msg.get("elapsed_s")), digests(msg.get("bound")),
                   count(msg.get("launches")), digests(msg.get("pre"), ("in",)))


@dataclass(frozen=True)
class RecheckReply:
    digests: Digests = field(default_factory=dict)
    """Save path -> digest of that call's outputs now."""

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "digests": self.digests}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> RecheckReply:
        raw = msg.get("digests")
        now = {str(k): v for k, v in raw.items() if isinstance(v, str)} if isinstance(
            raw, dict) else {}
        return cls(now)


@dataclass(frozen=True)
class TimedReply:
    """A ``timed`` batch's reply, unchecked: ``times_s``/``re_out`` are None unless lists."""

    times_s: list[Any] | None = None
    re_out: list[Any] | None = None
    clock: dict[str, Any] = field(default_factory=dict)
    """How the worker says it timed (GPU): informational, never trusted for a decision."""

    def to_wire(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"ok": True, "times_s": self.times_s}
        if self.clock:
            msg["clock"] = self.clock
        msg["re_out"] = self.re_out
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> TimedReply:
        times, re_out, clock = msg.get("times_s"), msg.get("re_out"), msg.get("clock")
        return cls(times if isinstance(times, list) else None,
                   re_out if isinstance(re_out, list) else None,
                   clock if isinstance(clock, dict) else {})


@dataclass(frozen=True)
class DumpReply:
    bound: list[Digests] | None = None
    """Digests of each dumped call's results, in the request's order (None: not a list)."""

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "bound": self.bound}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> DumpReply:
        raw = msg.get("bound")
        return cls([digests(b) for b in raw] if isinstance(raw, list) else None)


@dataclass(frozen=True)
class Progress:
    """A frame sent before a reply: results bound call by call (see ``Step``). On the host
    ``step`` is whatever the frame said (checked against the expected order there)."""

    step: str
    i: int | None = None
    """The timed call's index in its batch (None in a ``sample``'s frame)."""
    digests: Digests = field(default_factory=dict)
    launches: int | None = None
    described: list[Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"progress": True, "stage": str(Step(self.step).value)}
        if self.i is not None:
            msg["i"] = self.i
        if self.step == Step.DONE:
            msg["launches"] = self.launches
        if self.described is not None:
            msg["described"] = self.described
        msg.update(self.digests)
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Progress:
        step, described = msg.get("stage"), msg.get("described")
        return cls(step if isinstance(step, str) else repr(step), count(msg.get("i")),
                   digests(msg), count(msg.get("launches")),
                   described if isinstance(described, list) else None)
