"""The Docker backend: every job in a fresh, hardened container of a pinned worker image.

The container: no network, read-only root, all capabilities dropped, no-new-privileges, our
seccomp profile (default deny), non-root user, cgroup limits (memory = memory+swap, pids,
CPU), rlimits, an init as pid 1, a size-capped tmpfs for scratch; candidate sources and input
blobs bind-mounted read-only, the out dir the only writable mount. The image is run by its
id (``sha256:...``), resolved once when the backend is built, so a re-tagged image cannot
slip in between jobs. Runtime: ``runc`` (default) or ``runsc`` (gVisor, its own kernel).

The worker's channel is the container's stdin/stdout over Docker's attach socket (see
docker_stream); its stderr is the capped log. Every docker SDK failure becomes a
``SandboxError``; containers are removed in every path, and labelled so that
:meth:`DockerSandbox.cleanup_leaked` can find any that a crashed host left behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

from ..errors import SandboxError
from .docker_config import (
    DEFAULT_IMAGE,
    IMAGE_ENV,
    LABEL,
    WORKER_LABEL,
    ContainerSettings,
    JobExtras,
    create_args,
    load_seccomp,
    prepare_host_dirs,
    worker_sha256,
)
from .docker_container import Container, remove, translated
from .docker_gpu import VISIBLE, device_nodes, driver_lib_binds
from .docker_hostrt import DRIVER_LIBS, ldconfig_paths
from .docker_image import HOST_RUNTIME, image_binds
from .interface import JobSpec, Sandbox, SandboxedProcess

__all__ = ["DockerSandbox", "translated"]
RUNTIMES = ("runc", "runsc")
API_TIMEOUT_S = 30.0


class DockerSandbox(Sandbox):
    """Docker backend. ``runtime``: ``runc`` or ``runsc`` (gVisor, must be registered)."""

    name = "docker"

    def __init__(self, *, runtime: str = "runc", image: str | None = None,
                 cpus: float | None = None, tmpfs_mb: int = 1024, out_quota_mb: int = 4096,
                 seccomp_profile: Path | None = None, user: tuple[int, int] | None = None,
                 api_timeout_s: float = API_TIMEOUT_S,
                 require_current_worker: bool = True) -> None:
        import docker

        if runtime not in RUNTIMES:
            raise SandboxError(f"docker: runtime {runtime!r} is not one of {RUNTIMES}")
        if user is not None and 0 in user:
            raise SandboxError("docker: the worker may not run as root (uid or gid 0)")
        self.runtime = runtime
        self.image_ref = image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE
        self.settings = ContainerSettings(
            user=user, cpus=cpus if cpus is not None else float(min(os.cpu_count() or 1, 2)),
            tmpfs_mb=tmpfs_mb, out_quota_mb=out_quota_mb)
        self._seccomp = load_seccomp(seccomp_profile)
        self._warnings: list[str] = []
        with translated("connect"):
            self._client = docker.from_env(version="auto", timeout=int(api_timeout_s))
        self._api = self._client.api
        with translated("engine info"):
            info = self._api.info()
            self.engine_version = str(self._api.version().get("Version", "?"))
        runtimes = info.get("Runtimes") or {}
        if runtime not in runtimes:
            raise SandboxError(f"docker: runtime {runtime!r} is not registered with the engine "
                               f"(has {sorted(runtimes)}; see scripts/ci_docker_setup.sh)")
        args = list((runtimes.get(runtime) or {}).get("runtimeArgs") or [])
        self._nvproxy = "--nvproxy" in args or "--nvproxy=true" in args
        self._seccomp_enforced = runtime == "runc" or "--oci-seccomp" in args
        if runtime == "runsc" and "--network=none" not in args:
            raise SandboxError("docker: runsc must be registered with runtimeArgs "
                               "[\"--network=none\"] (gVisor refuses to start otherwise)")
        if not self._seccomp_enforced:
            self._warnings.append("docker: runsc without --oci-seccomp ignores the seccomp "
                                  "profile (gVisor's own syscall filter still applies)")
        try:
            with translated(f"image {self.image_ref}"):
                image_obj = self._client.images.get(self.image_ref)
        except SandboxError as exc:
            if "no such image" in str(exc).lower():
                raise SandboxError(f"docker: image {self.image_ref} not found (build it: "
                                   "containers/build.sh)") from None
            raise
        self.image_digest: str = str(image_obj.id)
        """The image id (``sha256:...``, the digest of its config): what every job runs."""
        self.image_kind, self.host_binds, self._host_path = image_binds(image_obj.attrs)
        """An offline image (``host-runtime``) names the host paths every job binds."""
        self._check_hidden(self.host_binds)
        self._toolkit = "nvidia" in runtimes and runtime == "runc"
        """The NVIDIA container runtime is registered: a self-contained image uses it."""
        labels = (image_obj.attrs.get("Config") or {}).get("Labels") or {}
        self.worker_sha256 = str(labels.get(WORKER_LABEL, ""))
        if require_current_worker and self.worker_sha256 != worker_sha256():
            raise SandboxError(f"docker: image {self.image_ref} was built from other worker "
                               "sources than this harness's; rebuild it (containers/build.sh)")

    @classmethod
    def available(cls, *, runtime: str = "runc", image: str | None = None) -> tuple[bool, str]:
        """(usable, why): an engine answers, the runtime is registered, the image exists."""
        try:
            sandbox = cls(runtime=runtime, image=image)
        except SandboxError as exc:
            return False, str(exc)
        except ImportError as exc:  # the SDK itself is missing
            return False, f"docker SDK not importable: {exc}"
        sandbox.close()
        return True, (f"docker {sandbox.engine_version}, runtime {runtime}, "
                      f"image {sandbox.image_ref} = {sandbox.image_digest}")

    def start(self, job: JobSpec, deadline_s: float) -> SandboxedProcess:
        import docker.types

        if job.gpu and self.runtime == "runsc" and not self._nvproxy:
            raise SandboxError("docker: GPU jobs under runsc need gVisor's --nvproxy in the "
                               "runtime's runtimeArgs (and a runsc build that has it)")
        user = self.settings.job_user()
        extras, runtime = self._job_extras(job)
        with translated("prepare job directories"):
            prepare_host_dirs(job, user, host_scratch=extras.host_scratch)
        if os.stat(job.data_dir).st_mode & 0o005 != 0o005:
            self._warn(f"data dir {job.data_dir} is not world-readable: the container user "
                       "cannot read safetensors inputs there")
        job_id = secrets.token_hex(6)
        labels = {LABEL: job_id, "sandboxharness.role": job.role,
                  "sandboxharness.host-pid": str(os.getpid())}
        container, host = create_args(
            job, image_id=self.image_digest, runtime=runtime, seccomp=self._seccomp,
            settings=self.settings, user=user, name=f"shx-{job.role}-{job_id}", labels=labels,
            ulimit_type=docker.types.Ulimit, mount_type=docker.types.Mount,
            log_config=docker.types.LogConfig(type="none"), extras=extras)
        with translated("create container"):
            created = self._api.create_container(
                host_config=self._api.create_host_config(**host), **container)
        cid = created["Id"]
        for warning in created.get("Warnings") or []:
            self._warn(f"docker: {warning}")
        try:
            return Container(self._api, cid, job, deadline_s, self.settings,
                             host_scratch=extras.host_scratch)
        except BaseException:
            remove(self._api, cid)
            raise

    def _job_extras(self, job: JobSpec) -> tuple[JobExtras, str]:
        """(extras, runtime) for ``job``: the offline image's binds, and for
        a GPU job its lane's device nodes (or, for a self-contained image where the NVIDIA
        runtime is registered, that runtime's device request for the same GPU)."""
        import docker.types

        host_rt = self.image_kind == HOST_RUNTIME
        binds = tuple(self.host_binds)
        path = tuple(self._host_path) if host_rt else None
        if not job.gpu:
            return JobExtras(binds=binds, host_path=path, host_scratch=host_rt), self.runtime
        visible = job.env.get(VISIBLE)
        if self._toolkit and not host_rt:
            ids = [v.strip() for v in (visible or "").split(",") if v.strip()]
            req = docker.types.DeviceRequest(driver="nvidia", capabilities=[["gpu"]],
                                             **({"device_ids": ids} if ids else {"count": -1}))
            renumber = {VISIBLE: ",".join(str(i) for i in range(len(ids)))} if ids else {}
            return JobExtras(host_scratch=True, device_request=req,
                             env=tuple(renumber.items())), "nvidia"
        devices, env = device_nodes(visible)
        files: tuple[tuple[str, str], ...] = ()
        if not host_rt:  # the image's own userland, the host's driver: bind it file by file
            files = tuple(driver_lib_binds(ldconfig_paths(DRIVER_LIBS)))
            lib = job.env.get("LD_LIBRARY_PATH")
            env["LD_LIBRARY_PATH"] = ":".join(filter(None, [lib, "/usr/local/nvidia/lib64"]))
        return (JobExtras(binds=binds, file_binds=files, devices=tuple(devices),
                          host_scratch=True, host_path=path, env=tuple(env.items())),
                self.runtime)

    @staticmethod
    def _check_hidden(binds: list[str]) -> None:
        """No bind may reveal the job roots (other jobs' files) or the checkout the harness
        runs from (its keys and logs often live there); an installed package's site dir may be
        bound, the package itself holds nothing secret."""
        import tempfile

        own = [tempfile.gettempdir()]
        root = Path(__file__).resolve().parents[2]
        if root.name not in ("site-packages", "dist-packages"):
            own.append(str(root))
        for b in binds:
            for p in own:
                if p == b or p.startswith(b.rstrip("/") + "/"):
                    raise SandboxError(f"docker: the image binds host path {b}, which holds "
                                       f"{p}: refusing (rebuild the image with the runtime "
                                       "outside it)")

    def isolation(self) -> list[str]:
        layers = ["docker", "netns", "pidns", "ipcns", "utsns", "mountns", "no_new_privs",
                  "cap-drop-all", "read-only-root", "non-root", "cgroups", "rlimits",
                  "scrubbed-env", "private-tmp", "out-quota", "hidden-paths",
                  f"runtime:{self.runtime}"]
        if self._seccomp_enforced:
            layers.append("seccomp")
        if self.runtime == "runsc":
            layers.append("gvisor")
        return layers

    def _warn(self, text: str) -> None:
        if text not in self._warnings:
            self._warnings.append(text)

    def warnings(self) -> list[str]:
        return list(self._warnings)

    def describe(self) -> dict[str, str]:
        """What the verdict's environment should record about this backend."""
        out = {"backend": self.name, "runtime": self.runtime, "image": self.image_ref,
               "image_digest": self.image_digest, "worker_sha256": self.worker_sha256,
               "engine": self.engine_version,
               "image_kind": self.image_kind or "self-contained",
               "gpu_passthrough": ("nvidia-runtime" if self._toolkit and not self.image_kind
                                   else "device-nodes (lane's GPU only)")}
        if self.host_binds:
            out["host_binds_ro"] = ",".join(self.host_binds)
        return out

    def cleanup_leaked(self, older_than_s: float = 30 * 60) -> list[str]:
        """Remove labelled containers created more than ``older_than_s`` ago; their ids."""
        with translated("list containers"):
            found = self._api.containers(all=True, filters={"label": LABEL})
        now, removed = time.time(), []
        for c in found:
            if now - float(c.get("Created", now)) >= older_than_s:
                remove(self._api, c["Id"])
                removed.append(str(c["Id"]))
        return removed

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
