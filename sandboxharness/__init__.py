"""sandboxharness: validate, isolate, time and audit LLM-written GPU kernels.

Cheap to import: heavy modules (torch, the pipeline) load on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Definition", "Harness", "HarnessError", "InputError", "InfrastructureError", "Policy",
    "Reason", "ReasonCode", "Solution", "Verdict", "WorkloadTrace", "default_policy",
    "evaluate_files", "load_definition", "load_policy", "load_solution", "load_workloads",
]

_LAZY = {
    "Harness": "sandboxharness.pipeline",
    "evaluate_files": "sandboxharness.api",
    "default_policy": "sandboxharness.api",
    "load_definition": "sandboxharness.intake",
    "load_policy": "sandboxharness.intake",
    "load_solution": "sandboxharness.intake",
    "load_workloads": "sandboxharness.intake",
    "Definition": "sandboxharness.models",
    "Policy": "sandboxharness.models",
    "Reason": "sandboxharness.models",
    "ReasonCode": "sandboxharness.models",
    "Solution": "sandboxharness.models",
    "Verdict": "sandboxharness.models",
    "WorkloadTrace": "sandboxharness.models",
    "HarnessError": "sandboxharness.errors",
    "InputError": "sandboxharness.errors",
    "InfrastructureError": "sandboxharness.errors",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandboxharness' has no attribute {name!r}")


if TYPE_CHECKING:
    from .api import default_policy, evaluate_files
    from .errors import HarnessError, InfrastructureError, InputError
    from .intake import load_definition, load_policy, load_solution, load_workloads
    from .models import Definition, Policy, Reason, ReasonCode, Solution, Verdict, WorkloadTrace
    from .pipeline import Harness
