#!/bin/bash
# Prepare a bare device machine for benchmarks/gpu_validate.py (run from the repo root).
# Carried in .whl/: site.tar.xz (a `pip install --target` tree for Python 3.12, built on the
# CPU machine: see benchmarks/README.md) and/or wheels. Both land in .site/ inside the repo:
# the process sandbox exposes the repo (the harness's own package root) to the worker, and a
# .pth in the interpreter's site-packages makes both importable, also under `python -I`.
# Writes .site/env.sh: PATH with the analysers, and where cupti-python finds libcupti.
set -euo pipefail
REPO=$(pwd)
PY=$(command -v python3)
mkdir -p .site
for part in .whl-semgrep/semgrep.tar.xz .whl/site.tar.xz; do  # semgrep may come a call earlier
  if [ -f "$part" ]; then
    tar -C "$REPO" -xJf "$part" --transform 's,^site,.site,'
  fi
done
sed -i "1s|^#!.*python.*\$|#!$PY|" .site/bin/* 2>/dev/null || true
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$REPO/.site" .whl/*.whl
fi
# pyseccomp finds libseccomp through ldconfig: install the carried copy where the device has none
if ! ldconfig -p | grep -q libseccomp.so.2 && [ -f .whl/libseccomp.so.2 ]; then
  install -m 0644 .whl/libseccomp.so.2 /usr/local/lib/libseccomp.so.2 && ldconfig
fi
SP=$("$PY" -c 'import site; print(site.getsitepackages()[0])')
printf '%s\n%s\n' "$REPO" "$REPO/.site" > "$SP/zz-sandboxharness.pth"
# cupti-python dlopens plain "libcupti.so": point it at the copy torch itself loaded
LIB=$("$PY" -c 'import torch, re; torch.cuda.init()
libs = {m.group(0) for m in re.finditer(r"/\S*libcupti\.so[.\d]*", open("/proc/self/maps").read())}
print(sorted(libs)[0] if libs else "")')
{
  echo "export PATH=$REPO/.site/bin:\$PATH"
  if [ -n "$LIB" ]; then
    mkdir -p .site/cupti-lib && ln -sf "$LIB" .site/cupti-lib/libcupti.so
    echo "export SHX_CUPTI_LIB_DIR=$REPO/.site/cupti-lib"
  fi
} > .site/env.sh
echo "libcupti loaded by torch: ${LIB:-none}; toolkit: $(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>&1)"
"$PY" -c 'import sandboxharness.pipeline, pydantic, tvm_ffi; print("setup ok", tvm_ffi.__version__)'
