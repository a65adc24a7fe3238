"""GPU pass-through without the NVIDIA container toolkit: the device nodes of a job's lane.

A job sees only its own GPU: ``/dev/nvidia<minor>`` of the GPU its lane names (the lane gives
``CUDA_VISIBLE_DEVICES``, a CUDA index or a ``GPU-`` UUID), plus the control nodes every CUDA
process needs (``nvidiactl``, ``nvidia-uvm``, ``nvidia-uvm-tools`` where loaded). CUDA inside
the container enumerates only the GPUs whose nodes it can open, so the lane's GPU is ``cuda:0``
there and ``CUDA_VISIBLE_DEVICES`` is rewritten to match. CUDA indices map to device minors
through NVML (the host's view, PCI-bus order as the lanes use); without NVML, index == minor.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..errors import SandboxError

CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
VISIBLE = "CUDA_VISIBLE_DEVICES"
_MINOR = re.compile(r"^nvidia(\d+)$")


def host_minors(dev: Path = Path("/dev")) -> list[int]:
    """Minor numbers of the GPUs whose nodes this host has."""
    try:
        names = [p.name for p in dev.iterdir()]
    except OSError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _MINOR.match(n)))


def nvml_minors() -> tuple[dict[str, int], dict[str, int]] | None:
    """(CUDA index -> minor, UUID -> minor) from NVML, or None where NVML does not load."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  no driver here: the caller falls back
        return None
    try:
        by_index, by_uuid = {}, {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            minor = int(pynvml.nvmlDeviceGetMinorNumber(h))
            uuid = pynvml.nvmlDeviceGetUUID(h)
            by_index[str(i)] = minor
            by_uuid[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = minor
        return by_index, by_uuid
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110  shutdown failing changes nothing found
            pass


def lane_minors(visible: str | None, *, available: list[int],
                mapping: Callable[[], tuple[dict[str, int], dict[str, int]] | None] = nvml_minors
                ) -> list[int]:
    """The minors a job with ``CUDA_VISIBLE_DEVICES=visible`` may open; every GPU when unset."""
    if visible is None or not visible.strip():
        return list(available)
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    table = mapping()
    minors: list[int] = []
    for item in wanted:
        if table is not None:
            by_index, by_uuid = table
            minor = by_index.get(item, by_uuid.get(item))
        else:
            minor = int(item) if item.isdigit() else None
        if minor is None or minor not in available:
            raise SandboxError(f"docker: GPU {item!r} of the job's lane ({VISIBLE}={visible}) "
                               f"has no device node here (have /dev/nvidia{available})")
        if minor not in minors:
            minors.append(minor)
    return minors


def device_nodes(visible: str | None, *, dev: Path = Path("/dev"),
                 mapping: Callable[[], tuple[dict[str, int], dict[str, int]] | None] = nvml_minors
                 ) -> tuple[list[str], dict[str, str]]:
    """(Docker ``devices`` entries, environment changes) for one GPU job."""
    available = host_minors(dev)
    if not available or not (dev / "nvidiactl").exists():
        raise SandboxError(f"docker: a GPU job, but this host has no NVIDIA device nodes in {dev}")
    minors = lane_minors(visible, available=available, mapping=mapping)
    nodes = [str(dev / f"nvidia{m}") for m in minors]
    nodes += [str(dev / Path(c).name) for c in CONTROL_NODES if (dev / Path(c).name).exists()]
    entries = [f"{n}:/dev/{Path(n).name}:rwm" for n in nodes]
    return entries, {VISIBLE: ",".join(str(i) for i in range(len(minors)))}


def driver_lib_binds(libs: dict[str, str], target: str = "/usr/local/nvidia/lib64"
                     ) -> list[tuple[str, str]]:
    """(host file, container path) for a self-contained image without the toolkit: each
    driver library bound on its own (never a whole host lib dir: its glibc-linked neighbours
    would mix with the image's own)."""
    return [(str(Path(p).resolve()), f"{target}/{name}") for name, p in sorted(libs.items())]
