#!/bin/bash
# Prepare a bare device machine for benchmarks/gpu_validate.py (run from the repo root).
# Wheels carried in .whl/ go to .site/ inside the repo: the process sandbox exposes the
# repo (the harness's own package root) to the worker, and a .pth in the interpreter's
# site-packages makes both importable, also under `python -I` (isolated mode keeps .pth).
set -euo pipefail
REPO=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$REPO/.site" .whl/*.whl
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
printf '%s\n%s\n' "$REPO" "$REPO/.site" > "$SP/zz-sandboxharness.pth"
python3 -c 'import sandboxharness.pipeline, pydantic, tvm_ffi; print("setup ok", tvm_ffi.__version__)'
