"""Unusual honest solutions under the shipped default policy, analysers on: promoted on the
process backend and, where an engine and the test image are there (CI), on Docker. Nothing
honest may be rejected by the defenses against the cheat classes (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.api import default_policy
from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.pipeline import Harness
from tests.conftest import TRITON_RMS
from tests.integration.test_bound_results import MULTI_KERNEL, sandbox_for

pytestmark = pytest.mark.slow

F_RMS_NORM = ("import torch\nimport torch.nn.functional as F\n\n\n"
              "def run(x, w):\n    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)\n")
CONSTANTS = ("import torch\n\nEPS = 1e-6\nDIMS = (-1,)\n\n\n"
             "def run(x, w):\n"
             "    inv = torch.rsqrt(x.pow(2).mean(DIMS, keepdim=True) + EPS)\n"
             "    out = x.new_empty((x.shape[0] + 2, x.shape[1]))[: x.shape[0]]\n"
             "    torch.mul(x * inv, w, out=out)\n"
             "    return out\n")
CONTROLS = {
    "f_rms_norm": (F_RMS_NORM, False, "python"),
    "module_constants_padded_view": (CONSTANTS, False, "python"),
    "multi_kernel_triton": (MULTI_KERNEL, True, "triton"),
    "triton_rms": (TRITON_RMS, True, "triton"),
}


@pytest.mark.parametrize("backend", ["process", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_honest_control_is_promoted_under_the_default_policy(
        control: str, backend: str, tiny_def_path: Path, tiny_wl_path: Path,
        write_solution) -> None:  # type: ignore[no-untyped-def]
    code, dps, language = CONTROLS[control]
    sandbox = sandbox_for(backend)
    policy = default_policy()
    try:
        harness = Harness(policy, sandbox=sandbox) if sandbox else Harness(policy)
        v = harness.evaluate(load_definition(tiny_def_path),
                             load_solution(write_solution(code, dps=dps, language=language)),
                             load_workloads(tiny_wl_path), seed=5)
    finally:
        if sandbox is not None:
            sandbox.close()
    assert v.decision == "promote", [(r.code.value, r.message) for r in v.reasons]
    assert v.policy.sha256 == policy.content_hash()
