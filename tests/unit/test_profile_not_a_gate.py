"""The profile is evidence, never a gate: a policy cannot require it, and a profile that could
not be made (skipped, with its reason) leaves the promotion decision as it was."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sandboxharness.models import Policy, Stage, StageResult
from sandboxharness.policy.decide import decide


def test_a_policy_cannot_require_the_profile() -> None:
    with pytest.raises(ValidationError, match="required_stages"):
        Policy.model_validate({"name": "p", "required_stages": ["correctness", "profile"]})


def test_a_skipped_profile_does_not_change_the_decision() -> None:
    policy = Policy.model_validate({"name": "p"})
    passed = [StageResult(stage=Stage(s), status="passed", duration_s=0.1)
              for s in policy.required_stages]
    unprofiled = StageResult(stage=Stage.PROFILE, status="skipped", duration_s=0.0,
                             details={"reason": "no signature: unreadable ncu report: x"})
    assert decide([*passed, unprofiled], policy).status == "passed"
    assert decide(passed, policy).status == "passed"
