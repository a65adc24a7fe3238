"""Counts the Triton kernels a call launches, so a ``triton`` solution that does its work in
torch ops instead is seen at run time (static rules miss tensor methods and operators).

Installed before the candidate is imported: on a GPU through Triton's own launch hook (every
compiled launch passes it, autotuned or direct), under the interpreter (CPU) by wrapping the
grid executor. The integrity snapshot covers both, so removing them is a violation.
"""

from __future__ import annotations

from typing import Any


class LaunchCounter:
    def __init__(self) -> None:
        self.count = 0
        self.installed: dict[str, Any] = {}
        """What the integrity snapshot must find unchanged (name -> object)."""

    def _hook(self, *_args: Any, **_kwargs: Any) -> None:
        self.count += 1

    def install(self) -> None:
        import triton  # noqa: F401

        try:
            from triton.runtime import interpreter
        except ImportError:  # pragma: no cover - every supported triton has it
            interpreter = None
        if interpreter is not None and hasattr(interpreter, "GridExecutor"):
            original = interpreter.GridExecutor.__call__
            counter = self

            def counted(executor: Any, *args: Any, **kwargs: Any) -> Any:
                counter.count += 1
                return original(executor, *args, **kwargs)

            interpreter.GridExecutor.__call__ = counted
            self.installed["triton.interpreter.GridExecutor.__call__"] = counted
        knobs = getattr(triton, "knobs", None)
        runtime = getattr(knobs, "runtime", None)
        chain = getattr(runtime, "launch_enter_hook", None)
        if chain is not None and hasattr(chain, "add"):
            chain.add(self._hook)
            self.installed["triton.knobs.runtime.launch_enter_hook"] = chain
        elif runtime is not None and chain is None:
            runtime.launch_enter_hook = self._hook
            self.installed["triton.knobs.runtime.launch_enter_hook"] = self._hook

    def intact(self) -> list[str]:
        """Names of hooks that are no longer in place."""
        bad = []
        from triton.runtime import interpreter

        grid = self.installed.get("triton.interpreter.GridExecutor.__call__")
        if grid is not None and interpreter.GridExecutor.__call__ is not grid:
            bad.append("triton.interpreter.GridExecutor.__call__")
        hook = self.installed.get("triton.knobs.runtime.launch_enter_hook")
        if hook is not None:
            import triton

            now = triton.knobs.runtime.launch_enter_hook
            calls = getattr(now, "calls", None)
            ok = (now is hook and (calls is None or self._hook in calls)) if calls is not None \
                else now is hook
            if not ok:
                bad.append("triton.knobs.runtime.launch_enter_hook")
        return bad

    def take(self) -> int:
        n, self.count = self.count, 0
        return n
