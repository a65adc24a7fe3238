"""Build the offline worker image (no registry, no package index): a skeleton root imported
with ``docker import``, its runtime bound read-only from this host at run time.

    python containers/build_offline.py [--tag sandboxharness-worker:host] [--gpu] [--json]

Run it with the interpreter the worker should use (the one that has torch and triton: its
venv, site dirs and base install are what the image binds). ``--gpu`` also binds the CUDA
toolkit, compute-sanitizer, ncu and the driver libraries found here. Prints ``TAG ID`` (the
id the Docker backend pins and every verdict records) and, on stderr, the host paths every
container will get read-only. Then: ``SANDBOXHARNESS_DOCKER_IMAGE=TAG sandboxharness evaluate
--backend docker ...``. Re-run after moving or upgrading the runtime (the backend refuses an
image whose bound paths are gone) or after editing the worker (its hash is a label).
Exit 0 built, 3 no engine or the import failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandboxharness.errors import SandboxError  # noqa: E402
from sandboxharness.sandbox.docker_hostrt import discover  # noqa: E402
from sandboxharness.sandbox.docker_image import DEFAULT_TAG, import_image  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", default=DEFAULT_TAG)
    ap.add_argument("--gpu", action="store_true", help="also the CUDA tools and driver libraries")
    ap.add_argument("--json", action="store_true", help="print the runtime found as JSON")
    args = ap.parse_args()
    t0 = time.monotonic()
    try:
        import docker

        rt = discover(gpu=args.gpu, forbidden=(str(REPO / "sandboxharness"),
                                               tempfile.gettempdir()))
        client = docker.from_env(version="auto", timeout=120)
        image_id = import_image(client.api, rt, args.tag)
    except (SandboxError, ImportError) as exc:
        print(f"build_offline: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:  # noqa: BLE001  the engine's own failure: one line, exit 3
        print(f"build_offline: docker: {type(exc).__name__}: {str(exc).splitlines()[0]}",
              file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps({"tag": args.tag, "id": image_id, **dataclasses.asdict(rt)}, indent=1))
    else:
        print(f"bound read-only: {' '.join(rt.binds)}", file=sys.stderr)
        if rt.missing:
            print(f"not found here: {' '.join(rt.missing)}", file=sys.stderr)
        print(f"built in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        print(f"{args.tag} {image_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
