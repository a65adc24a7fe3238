"""policies/seccomp/docker-worker.json: default deny, and the dangerous calls never allowed.

(The profile's effect inside a real container is checked in
tests/integration/test_docker_hardening.py; this pins its content.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandboxharness.errors import SandboxError
from sandboxharness.sandbox.docker_config import load_seccomp

PROFILE = Path(__file__).resolve().parents[2] / "policies" / "seccomp" / "docker-worker.json"
MUST_DENY = [
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "unshare", "setns", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
    "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
    "fsopen", "fsmount", "move_mount", "open_tree", "chroot", "reboot", "swapon", "acct",
]
AF_UNIX, CLONE_NEW_ANY = 1, 0x7E020000


@pytest.fixture(scope="module")
def profile() -> dict:
    return json.loads(load_seccomp(PROFILE))


def _rules(profile: dict, name: str) -> list[dict]:
    return [r for r in profile["syscalls"] if name in r["names"]]


def test_default_action_denies(profile: dict) -> None:
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"


@pytest.mark.parametrize("name", MUST_DENY)
def test_dangerous_syscall_is_never_allowed(profile: dict, name: str) -> None:
    """Attack: reach kernel attack surface (namespaces, mounts, bpf, io_uring, keyrings...)."""
    assert all(r["action"] != "SCMP_ACT_ALLOW" for r in _rules(profile, name))


def test_sockets_only_for_af_unix(profile: dict) -> None:
    """Attack: open AF_INET/AF_INET6/AF_PACKET/AF_NETLINK sockets; AF_UNIX stays (CUDA)."""
    for name in ("socket", "socketpair"):
        rules = _rules(profile, name)
        assert rules, name
        for rule in rules:
            assert rule["action"] == "SCMP_ACT_ALLOW"
            assert rule["args"] == [{"index": 0, "value": AF_UNIX, "op": "SCMP_CMP_EQ"}]
    assert not _rules(profile, "socketcall")


def test_clone_cannot_create_namespaces(profile: dict) -> None:
    (rule,) = [r for r in _rules(profile, "clone") if r["action"] == "SCMP_ACT_ALLOW"]
    (arg,) = rule["args"]
    assert arg["op"] == "SCMP_CMP_MASKED_EQ" and arg["value"] == CLONE_NEW_ANY
    assert arg.get("valueTwo", 0) == 0
    (clone3,) = _rules(profile, "clone3")
    assert clone3["action"] == "SCMP_ACT_ERRNO" and clone3["errnoRet"] == 38  # ENOSYS


def test_only_native_64_bit_abis(profile: dict) -> None:
    """Attack: use the 32-bit syscall entry (int 0x80 / x32) to dodge a 64-bit-only filter."""
    assert set(profile["architectures"]) == {"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"}


def test_documentation_keys_are_not_sent(profile: dict) -> None:
    raw = json.loads(PROFILE.read_text())
    assert any(k.startswith("x-") for k in raw)
    assert not any(k.startswith("x-") for k in profile)
    for name in raw["x-denied"]:
        assert all(r["action"] != "SCMP_ACT_ALLOW" for r in _rules(profile, name)), name


def test_allow_by_default_profile_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "allow.json"
    bad.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}))
    with pytest.raises(SandboxError, match="must deny by default"):
        load_seccomp(bad)
    with pytest.raises(SandboxError, match="unreadable"):
        load_seccomp(tmp_path / "missing.json")
