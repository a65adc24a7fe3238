"""Shipped files (policies, semgrep rules, seccomp profile) are found in one place, fail closed
when missing, and the wheel's build configuration carries all of them."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from sandboxharness._internal import shipped
from sandboxharness.api import default_policy
from sandboxharness.errors import InfrastructureError
from sandboxharness.sandbox.docker_config import SECCOMP_ENV, load_seccomp
from sandboxharness.static.semgrep import SemgrepAnalyzer
from tests.conftest import REPO


@pytest.fixture
def empty_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(shipped.POLICY_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(SECCOMP_ENV, raising=False)
    return tmp_path


def test_missing_shipped_files_are_infrastructure_errors(empty_override: Path) -> None:
    """A wheel without policies/ once ran with a built-in policy and an empty deny list."""
    with pytest.raises(InfrastructureError, match=f"missing: {empty_override}/default.yaml"):
        default_policy()
    with pytest.raises(InfrastructureError, match="semgrep/python.yaml"):
        SemgrepAnalyzer()
    with pytest.raises(InfrastructureError, match="seccomp/docker-worker.json"):
        load_seccomp()


def test_one_missing_rule_set_is_enough_to_stop(empty_override: Path) -> None:
    shutil.copytree(REPO / "policies", empty_override, dirs_exist_ok=True)
    assert shipped.semgrep_rules_dir() == empty_override / "semgrep"
    (empty_override / "semgrep" / "cpp.yaml").unlink()  # C++/CUDA sources would go unscanned
    with pytest.raises(InfrastructureError, match="semgrep/cpp.yaml"):
        shipped.semgrep_rules_dir()


def test_checkout_uses_its_own_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(shipped.POLICY_DIR_ENV, raising=False)
    assert shipped.policies_dir() == REPO / "policies"
    assert default_policy().name == "default"
    for rel in (shipped.DEFAULT_POLICY, *shipped.SEMGREP_RULES, shipped.DOCKER_SECCOMP):
        assert shipped.shipped_file(rel) == REPO / "policies" / rel


def test_wheel_configuration_lists_every_package_and_shipped_file() -> None:
    """Packages are listed by hand (policies/ is mapped in): a new one must be added."""
    st = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(st["packages"])
    on_disk = {".".join(d.relative_to(REPO).parts) for d in (REPO / "sandboxharness").rglob("*")
               if d.is_dir() and any(d.glob("*.py"))} | {"sandboxharness"}
    assert on_disk - listed == set()
    assert st["package-dir"] == {"sandboxharness._shipped.policies": "policies",
                                 "sandboxharness._shipped.skills": "skills"}
    for path in (REPO / "policies").rglob("*"):
        if path.is_file():
            rel = path.relative_to(REPO / "policies")
            pkg = ".".join(("sandboxharness._shipped.policies", *rel.parent.parts))
            assert pkg in listed, rel
            assert any(path.match(g) for g in st["package-data"].get(pkg, [])), rel
    for path in (REPO / "skills").rglob("*.md"):  # every skill ships (bundles name their hashes)
        rel = path.relative_to(REPO / "skills")
        assert any(rel.match(g) for g in st["package-data"]["sandboxharness._shipped.skills"]), rel
