"""Candidates of a dataset run as Ray tasks on a cluster (``run --local DS --ray ADDRESS``).

Each candidate is one Ray task. Inside the Ray worker process it loads the dataset (once per
worker process, cached by root, policy hash and backend) and evaluates the task with the same
sandbox backends as a local run (``engine.local_evaluator``), on one lane: the GPU Ray gave
the task, or none on a CPU cluster. What comes back is data only: the verdict as JSON or the
harness error as (type name, message). The driver rebuilds them, and ``run_dataset`` alone
writes the traces and the audit records: Ray workers never touch either.

Every node must see the dataset at the driver's path (a shared filesystem) and run the same
harness version; the audit log and signing key stay on the driver.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import HarnessError, InfrastructureError, InputError
from ..models import Verdict
from ..stages.lanes import Lanes
from .engine import (
    DatasetRun,
    Evaluate,
    OnEvent,
    Outcome,
    RunEvent,
    RunOptions,
    Task,
    local_evaluator,
    outcome_of,
    visible_gpus,
)

_POLL_S = 1.0
"""How long one wait for results blocks: signals reach the driver's main thread between waits."""

# per Ray worker process: one DatasetRun per (root, policy, backend), one evaluator per lane
_RUNS: dict[tuple[str, str, str | None], DatasetRun] = {}
_EVALUATORS: dict[tuple[str, str, str | None, tuple[int, ...]], Evaluate] = {}


def _worker_evaluate(root: str, options: RunOptions, task: Task) -> dict[str, Any]:
    """The Ray task's body, in the Ray worker process: evaluate ``task``, return plain data."""
    import ray

    node = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    gpus = tuple(int(g) for g in ray.get_gpu_ids())  # the GPU Ray assigned, or none
    key = (root, options.policy.content_hash(), options.backend)
    try:
        if key not in _RUNS:
            _RUNS[key] = DatasetRun(root, options)
        if (*key, gpus) not in _EVALUATORS:
            _EVALUATORS[(*key, gpus)] = local_evaluator(_RUNS[key], Lanes(gpus))
    except HarnessError as exc:  # the driver read the dataset: this node's view or setup broke
        return {"error": [type(exc).__name__, f"setting up: {exc.diagnostics()}", False],
                "wall_s": 0.0, "node": node}
    outcome = outcome_of(task, _EVALUATORS[(*key, gpus)], lambda _e: None)
    if outcome.error is not None:
        err = outcome.error
        return {"error": [type(err).__name__, err.diagnostics(), isinstance(err, InputError)],
                "wall_s": outcome.wall_s, "node": node}
    assert outcome.verdict is not None  # noqa: S101  (outcome_of sets one of the two)
    return {"verdict": outcome.verdict.model_dump(mode="json"), "wall_s": outcome.wall_s,
            "node": node}


def _rebuilt(task: Task, reply: dict[str, Any]) -> Outcome:
    """The driver's Outcome from a worker's reply: the verdict validated again, the error typed."""
    wall = float(reply.get("wall_s", 0.0))
    if "error" in reply:
        name, message, is_input = reply["error"]
        error: HarnessError = (InputError(message) if is_input else
                               InfrastructureError(f"{name} on ray node {reply.get('node')}: "
                                                   f"{message}"))
        return Outcome(task, error=error, wall_s=wall)
    return Outcome(task, verdict=Verdict.model_validate(reply["verdict"]), wall_s=wall)


def _probe(address: str, timeout_s: float) -> None:
    """A host:port nobody listens on fails here in seconds (``ray.init`` would retry for minutes)."""
    from ray._private import services

    try:  # "auto" and RAY_ADDRESS resolve to the latest cluster's host:port, if any
        resolved = services.canonicalize_bootstrap_address(address) or address
    except Exception:  # noqa: BLE001  (ray.init gives the real answer below)
        return
    host, sep, port = resolved.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise InfrastructureError(f"ray cluster {address!r} cannot be reached at {resolved}: "
                                  f"{exc}") from None


@contextlib.contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """``ray.init`` installs its own SIGTERM handler when it can; the CLI's must stay."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _signals_through() -> Iterator[None]:
    """A signal handler's exception raised inside ray's compiled wait comes out wrapped in a
    SystemError; the interrupt (``Interrupted``, KeyboardInterrupt) is what must propagate."""
    try:
        yield
    except SystemError as exc:
        cause = exc.__cause__ or exc.__context__
        if cause is not None and not isinstance(cause, Exception):
            raise cause from None
        raise


def connect(address: str, *, timeout_s: float = 60.0) -> tuple[Any, bool]:
    """Connect this process to the cluster at ``address``: (the ``ray`` module, whether this
    call connected). A process already connected keeps its connection (and its cluster).

    Raises InfrastructureError (one line) when ray is missing or the cluster cannot be reached
    within ``timeout_s``."""
    try:
        import ray
    except ImportError:
        raise InfrastructureError("--ray needs the ray package (pip install "
                                  "'sandboxharness[ray]')") from None
    if ray.is_initialized():
        return ray, False
    _probe(address, min(timeout_s, 10.0))
    box: dict[str, BaseException] = {}

    def init() -> None:
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False,
                     logging_level=logging.ERROR)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller's thread)
            box["error"] = exc

    with _own_signal_handlers():  # a thread cannot hang the caller: ray.init retries for minutes
        thread = threading.Thread(target=init, name="ray-connect", daemon=True)
        thread.start()
        thread.join(timeout_s)
    if thread.is_alive():
        raise InfrastructureError(f"ray cluster {address!r}: no Ray GCS answered within "
                                  f"{timeout_s:.0f} s")
    if "error" in box:
        raise InfrastructureError(f"ray cluster {address!r} cannot be reached: "
                                  f"{box['error']}") from None
    return ray, True


class RayExecutor:
    """The engine's ``Executor`` on a Ray cluster: one Ray task per candidate.

    ``start`` and ``done`` events are emitted on the driver (``start`` when the task is
    submitted: the cluster's resources decide when it runs); ``stage`` events do not cross
    processes, so none are emitted. ``num_cpus`` per task (default 1); ``num_gpus`` is 1 when
    the run uses GPUs (``options.gpus`` non-empty, or None and CUDA visible to the driver),
    else 0. ``--jobs`` does not apply: the cluster's resources bound how many run at once."""

    remote = True
    """Tells ``run_dataset`` not to build a local sandbox backend on the driver."""

    def __init__(self, address: str, root: str | Path, options: RunOptions, *,
                 num_cpus: float = 1.0, connect_timeout_s: float = 60.0) -> None:
        self.address = address
        self.root = str(Path(root).resolve())
        self.options = options
        self.num_cpus = num_cpus
        self.connect_timeout_s = connect_timeout_s

    def num_gpus(self) -> int:
        gpus = self.options.gpus
        return int(bool(gpus) if gpus is not None else bool(visible_gpus()))

    def run(self, tasks: Sequence[Task], evaluate: Evaluate, on_event: OnEvent
            ) -> Iterator[Outcome]:
        """Yield each outcome as its Ray task finishes (``evaluate`` is not used: the
        evaluation happens in the Ray workers, with ``engine.local_evaluator``)."""
        if not tasks:
            return
        ray, connected = connect(self.address, timeout_s=self.connect_timeout_s)
        pending: dict[Any, Task] = {}
        try:
            gpus = self.num_gpus()
            if gpus and not ray.cluster_resources().get("GPU"):
                raise InfrastructureError(f"ray cluster {self.address!r} has no GPU and this "
                                          "run uses GPUs (--gpus 0 runs on CPUs)")
            body = ray.remote(_worker_evaluate).options(num_cpus=self.num_cpus, num_gpus=gpus,
                                                        max_retries=0)
            options = ray.put(self.options)
            for task in tasks:
                on_event(RunEvent("start", task))
                pending[body.remote(self.root, options, task)] = task
            while pending:
                with _signals_through():
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
                for ref in ready:
                    task = pending.pop(ref)
                    yield _collect(ray, ref, task)
        finally:  # an interrupt or a failure: nothing of this run keeps running on the cluster
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if connected:  # a connection the caller made stays theirs
                with contextlib.suppress(Exception):
                    ray.shutdown()


def _collect(ray: Any, ref: Any, task: Task) -> Outcome:
    """One finished task's outcome; a task Ray could not run (its worker or node died, it was
    cancelled) is an infrastructure error of that candidate, the others go on."""
    t0 = time.monotonic()
    try:
        with _signals_through():
            reply = ray.get(ref)
    except ray.exceptions.RayError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Outcome(task, error=InfrastructureError(
            f"ray task failed: {type(exc).__name__}: {first}"), wall_s=time.monotonic() - t0)
    return _rebuilt(task, reply)


__all__ = ["RayExecutor", "connect"]
