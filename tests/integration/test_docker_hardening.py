"""The Docker backend's isolation, observed from inside a real container.

A probe "candidate" records what it can see and do at import time (the worker's hello op)
into /job/out/facts.json; the host reads that file the way it reads results (no symlinks,
size-capped) and checks every fact. Run under runc and, where registered, gVisor (runsc).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sandboxharness.models.policy import Limits
from sandboxharness.sandbox.interface import JobSpec
from sandboxharness.stages.session import WorkerSession

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _ours(backend) -> list:  # type: ignore[no-untyped-def]
    """Labelled containers this test process created (others may run the harness meanwhile)."""
    return backend._api.containers(  # type: ignore[no-any-return]
        all=True, filters={"label": [f"sandboxharness.host-pid={os.getpid()}"]})

PROBE = r'''
import ctypes, errno, json, os, socket

facts = {}
def attempt(name, fn):
    try:
        fn()
        facts[name] = "ok"
    except OSError as exc:
        facts[name] = errno.errorcode.get(exc.errno, str(exc.errno))

status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines()
              if ":" in line)
for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    facts[key] = status.get(key, "").strip()
facts["uid"], facts["euid"], facts["gid"] = os.getuid(), os.geteuid(), os.getgid()
facts["groups"] = os.getgroups()
facts["pid"] = os.getpid()
facts["hostname"] = socket.gethostname()
facts["interfaces"] = sorted(l.split(":")[0].strip()
                             for l in open("/proc/net/dev").read().splitlines()[2:])
facts["env"] = sorted(os.environ)
root = [l.split() for l in open("/proc/self/mountinfo") if l.split()[4] == "/"]
facts["root_mount_opts"] = root[-1][5] if root else ""

def write(path):
    with open(path, "w") as fh:
        fh.write("x")
attempt("write_rootfs", lambda: write("/usr/lib/probe"))
attempt("write_etc", lambda: write("/etc/probe"))
attempt("write_src", lambda: write("/job/src/probe"))
attempt("write_data", lambda: write("/job/data/probe"))
attempt("write_tmp", lambda: write("/job/tmp/probe"))
attempt("write_out", lambda: write("/job/out/probe"))
attempt("socket_inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
attempt("socket_inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close())
attempt("socket_packet", lambda: socket.socket(17, socket.SOCK_RAW).close())
attempt("socket_unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())

libc = ctypes.CDLL(None, use_errno=True)
def sys_call(name, *args):
    def run():
        if getattr(libc, name)(*args) == -1:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    return run
attempt("unshare_user", sys_call("unshare", 0x10000000))
attempt("unshare_net", sys_call("unshare", 0x40000000))
attempt("mount", sys_call("mount", b"none", b"/job/tmp", b"tmpfs", 0, None))
attempt("ptrace_traceme", sys_call("ptrace", 0, 0, None, None))
attempt("setuid_root", sys_call("setuid", 0))
for name, nr in (("bpf", 321), ("perf_event_open", 298), ("keyctl", 250),
                 ("io_uring_setup", 425), ("kexec_load", 246), ("init_module", 175),
                 ("setns", 308)):
    attempt(name, sys_call("syscall", nr, 0, 0, 0, 0, 0))

with open("/job/out/facts.json", "w") as fh:
    json.dump(facts, fh)

def run(*args):
    raise RuntimeError("probe only")
'''

ALLOWED_ENV = {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_CACHE_DIR",
               "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME", "USER", "LOGNAME", "HOSTNAME"}


@pytest.fixture(scope="module", params=["runc", "runsc"])
def sandbox(request):
    from sandboxharness.sandbox.docker import DockerSandbox

    ok, why = DockerSandbox.available(runtime=request.param)
    if not ok:
        if os.environ.get("SANDBOXHARNESS_REQUIRE_DOCKER") == "1":  # CI: never skip silently
            pytest.fail(f"Docker backend ({request.param}) required but unavailable: {why}")
        pytest.skip(f"Docker backend ({request.param}) unavailable: {why}")
    backend = DockerSandbox(runtime=request.param)
    yield backend
    leaked = _ours(backend)
    backend.close()
    assert leaked == [], f"containers left behind: {[c['Names'] for c in leaked]}"


def _job(tmp_path: Path, source: str) -> JobSpec:
    dirs = {k: tmp_path / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    (dirs["src"] / "probe.py").write_text(source)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(memory_mb=2048),
                   env={"TRITON_INTERPRET": "1"})


def _read_facts(out_dir: Path) -> dict:
    fd = os.open(out_dir / "facts.json", os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return json.loads(os.read(fd, 1 << 20))
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def facts(sandbox, tmp_path_factory):
    job = _job(tmp_path_factory.mktemp(f"probe-{sandbox.runtime}"), PROBE)
    session = WorkerSession(sandbox.start(job, deadline_s=120), 120)
    paths = session.paths
    reply = session.request({"op": "hello", "role": "candidate", "entry_file": "probe.py",
                             "entry_func": "run", "dps": False, "preload_triton": False,
                             "src": paths.src, "data": paths.data, "device": "cpu"}, 120)
    info = session.close()
    assert reply["ok"] is True, info.stderr
    return _read_facts(job.out_dir)


def test_no_network_interface_but_loopback(facts):
    """Attack: exfiltrate inputs or fetch answers over the network."""
    assert facts["interfaces"] == ["lo"]


def test_inet_and_packet_sockets_denied_unix_allowed(facts):
    """Attack: open a network socket (even without an interface: probing, raw packets)."""
    assert facts["socket_inet"] == "EPERM"
    assert facts["socket_inet6"] == "EPERM"
    assert facts["socket_packet"] == "EPERM"
    assert facts["socket_unix"] == "ok"  # the CUDA driver needs AF_UNIX


def test_root_filesystem_is_read_only(facts):
    """Attack: plant files in the image (libraries, site-packages) for later jobs or the host."""
    assert facts["write_rootfs"] in ("EROFS", "EACCES")
    assert facts["write_etc"] in ("EROFS", "EACCES")
    assert "ro" in facts["root_mount_opts"].split(",")


def test_only_out_and_tmp_are_writable(facts):
    """Attack: rewrite the candidate's own sources or the input blobs between stages."""
    assert facts["write_src"] in ("EROFS", "EACCES")
    assert facts["write_data"] in ("EROFS", "EACCES")
    assert facts["write_out"] == "ok"
    assert facts["write_tmp"] == "ok"


def test_not_root_no_capabilities_no_new_privileges(facts, sandbox):
    """Attack: use root or a capability (or regain one via set-uid) to escape the container."""
    assert facts["uid"] != 0 and facts["euid"] != 0 and facts["gid"] != 0
    assert 0 not in facts["groups"]
    assert int(facts["CapEff"], 16) == 0
    assert int(facts["CapPrm"], 16) == 0
    assert int(facts["CapBnd"], 16) == 0
    assert facts["setuid_root"] == "EPERM"
    if sandbox.runtime == "runc":  # gVisor's /proc/self/status has no NoNewPrivs line
        assert facts["NoNewPrivs"] == "1"


def test_seccomp_filter_in_force(facts):
    """Attack: use kernel attack surface (bpf, io_uring, keyrings, perf, namespaces, ptrace)."""
    assert facts["Seccomp"] == "2"
    for call in ("unshare_user", "unshare_net", "mount", "ptrace_traceme", "bpf",
                 "perf_event_open", "keyctl", "io_uring_setup", "kexec_load", "init_module",
                 "setns"):
        assert facts[call] == "EPERM", (call, facts[call])  # the filter's answer, not EINVAL


def test_environment_is_scrubbed(facts):
    """Attack: read the host's secrets from inherited environment variables."""
    assert set(facts["env"]) <= ALLOWED_ENV | {"TRITON_INTERPRET"}
    assert facts["hostname"] == "sandbox"
    assert facts["pid"] != 1  # an init reaps and forwards signals; the worker is not pid 1
