"""The offline worker image: a skeleton root made with ``docker import``, no registry needed.

The root holds mount points, links and one small venv, nothing else:

- a mount point for every host path of the :class:`HostRuntime` (bound read-only at run time,
  at the same path), and the host root's top-level links (``lib -> usr/lib``);
- ``/opt/venv``: ``pyvenv.cfg`` naming the host interpreter's home, ``bin/python3`` linking to
  it, and in its site-packages the worker and input-generator sources (exactly what the other
  images ship, hashed into the same label) and a ``.pth`` that adds the host's site dirs
  after them. So the image contract holds: ``/opt/venv/bin/python3 -I -m sandboxharness.worker``
  is the worker, and compute-sanitizer's re-exec of ``sys.executable`` finds it too;
- ``/job/{src,data,out,tmp}``, ``/tmp``, ``/dev``, ``/proc``, ``/sys``, ``/etc``.

Its labels say what it is (``host-runtime``) and which host paths every container gets; the
Docker backend binds exactly those, and the verdict records them with the image id.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from .docker_config import IMAGE_PACKAGES, WORKER_LABEL, worker_sha256
from .docker_hostrt import HostRuntime

KIND_LABEL = "sandboxharness.image-kind"
BINDS_LABEL = "sandboxharness.host-binds"
PATH_LABEL = "sandboxharness.host-path"
PYTHON_LABEL = "sandboxharness.host-python"
MISSING_LABEL = "sandboxharness.host-missing"
HOST_RUNTIME = "host-runtime"
VENV = "/opt/venv"
SKELETON = ("dev", "proc", "sys", "tmp", "etc", "run", "job/src", "job/data", "job/out",
            "job/tmp")
DEFAULT_TAG = "sandboxharness-worker:host"


def _info(name: str, kind: bytes, mode: int, *, size: int = 0, link: str = "") -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name.lstrip("/"))
    ti.type, ti.mode, ti.size, ti.linkname = kind, mode, size, link
    ti.uid = ti.gid = 0
    ti.mtime = int(time.time())
    return ti


class _Root:
    """A tar stream of directories, links and small files, each parent made once."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)
        self.made: set[str] = set()

    def dir(self, path: str, mode: int = 0o755) -> None:
        parts = Path(path.lstrip("/")).parts
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in self.made:
                self.made.add(p)
                self.tar.addfile(_info(p, tarfile.DIRTYPE, mode))

    def file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.dir(str(Path(path).parent))
        self.made.add(path.lstrip("/"))
        self.tar.addfile(_info(path, tarfile.REGTYPE, mode, size=len(data)), io.BytesIO(data))

    def link(self, path: str, target: str) -> None:
        self.dir(str(Path(path).parent))
        self.made.add(path.lstrip("/"))
        self.tar.addfile(_info(path, tarfile.SYMTYPE, 0o777, link=target))

    def close(self) -> bytes:
        self.tar.close()
        return self.buf.getvalue()


def skeleton(rt: HostRuntime, package_root: Path | None = None) -> bytes:
    """The image's root as an uncompressed tar (a few hundred KiB)."""
    package_root = package_root or Path(__file__).resolve().parents[1]
    for b in rt.binds:
        if VENV.startswith(b.rstrip("/") + "/") or b in (VENV, "/job") or b.startswith("/job/"):
            raise SandboxError(f"offline image: host path {b} would hide the image's {VENV} "
                               "or /job")
    root = _Root()
    for d in SKELETON:
        root.dir(d, 0o1777 if d == "tmp" else 0o755)
    for name, target in rt.root_links:
        root.link(name, target)
    root.dir("sbin")
    for entry in rt.sbin:
        if Path(entry).name != "docker-init":
            root.link(f"sbin/{Path(entry).name}", entry)
    root.file("sbin/docker-init", b"", 0o755)  # the mount point of the engine's init
    for b in rt.binds:
        if any(b.startswith(o.rstrip("/") + "/") for o in rt.binds if o != b):
            continue  # a submount: its mount point is inside a bound tree already
        if os.path.isdir(b):
            root.dir(b)
        else:
            root.file(b, b"")
    ver = rt.python_version
    root.file(f"{VENV}/pyvenv.cfg", (f"home = {rt.python_home}\ninclude-system-site-packages = "
                                     f"false\nversion = {ver}\n").encode())
    exe = str(Path(rt.python_home) / Path(os.path.realpath(rt.python)).name)
    for name in ("python3", "python", f"python{ver}"):
        root.link(f"{VENV}/bin/{name}", exe)
    site = f"{VENV}/lib/python{ver}/site-packages"
    root.dir(site)
    # after the worker's own package: the host's site dirs, with their .pth files processed
    pth = "".join(f"import site; site.addsitedir({d!r})\n" for d in rt.site_dirs)
    root.file(f"{site}/zz-host-runtime.pth", pth.encode())
    root.file(f"{site}/sandboxharness/__init__.py",
              b'"""Worker-only install: the harness itself is not in this image."""\n')
    for pkg in IMAGE_PACKAGES:
        for src in sorted((package_root / pkg).rglob("*.py")):
            rel = src.relative_to(package_root).as_posix()
            root.file(f"{site}/sandboxharness/{rel}", src.read_bytes())
    return root.close()


def labels(rt: HostRuntime, package_root: Path | None = None) -> dict[str, str]:
    return {WORKER_LABEL: worker_sha256(package_root), KIND_LABEL: HOST_RUNTIME,
            BINDS_LABEL: json.dumps(list(rt.binds)), PATH_LABEL: json.dumps(list(rt.path_dirs)),
            PYTHON_LABEL: f"{rt.python} ({sys.version.split()[0]})",
            MISSING_LABEL: json.dumps(list(rt.missing))}


def import_image(api: Any, rt: HostRuntime, tag: str = DEFAULT_TAG) -> str:
    """``docker import`` the skeleton with its labels; the image id (``sha256:...``)."""
    repo, _, version = tag.rpartition(":")
    if not repo:
        repo, version = tag, "latest"
    changes = [f"LABEL {k}={json.dumps(v)}" for k, v in labels(rt).items()]
    changes += ['ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin', "USER 65534:65534",
                "WORKDIR /job/tmp"]
    reply = api.import_image_from_data(skeleton(rt), repository=repo, tag=version,
                                       changes=changes)
    text = reply if isinstance(reply, str) else json.dumps(reply)
    if "error" in text.lower() and "status" not in text.lower():
        raise SandboxError(f"docker import: {text.strip()[:300]}")
    return str(api.inspect_image(tag)["Id"])


def image_binds(attrs: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    """(kind, host binds, PATH dirs) an image's labels declare; kind '' for a built image."""
    lab = (attrs.get("Config") or {}).get("Labels") or {}
    if lab.get(KIND_LABEL) != HOST_RUNTIME:
        return "", [], []
    try:
        binds = [str(b) for b in json.loads(lab.get(BINDS_LABEL, "[]"))]
        path = [str(p) for p in json.loads(lab.get(PATH_LABEL, "[]"))]
    except ValueError:
        raise SandboxError(f"docker: image labels {BINDS_LABEL}/{PATH_LABEL} are not JSON "
                           "lists: rebuild it (containers/build_offline.py)") from None
    gone = [b for b in binds if not os.path.exists(b)]
    if gone:
        raise SandboxError(f"docker: the offline image binds host paths this host lacks "
                           f"({', '.join(gone[:3])}): rebuild it here (containers/build_offline.py)")
    return HOST_RUNTIME, binds, path
