#!/bin/bash
# One device call (run from the repo root on the GPU machine, carried .whl/site.tar.xz): the GPU
# tests (every GPU stage through the process sandbox, whose seccomp filter libseccomp builds),
# the bound-results attacks with CUDA tensors, the Docker seccomp profile against a real CUDA
# call, and (BENCH_S > 0) what binding costs. Logs under $OUT.
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
bash benchmarks/gpu_device_setup.sh > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
# shellcheck disable=SC1091
source .site/env.sh
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import pyseccomp; pyseccomp.SyscallFilter(pyseccomp.ALLOW); print('pyseccomp', pyseccomp.__version__, 'libseccomp loaded')" 2>&1; ldconfig -p | grep -m1 libseccomp
  git rev-parse --short HEAD 2>/dev/null || true
  date -u; } | tee "$OUT/env.txt"
timeout "${PYTEST_S:-330}" python3 -m pytest -q -p no:cacheprovider -rs --durations=15 \
  tests/gpu tests/escape/test_gpu_sandbox.py tests/integration/test_bound_results.py \
  -k "not docker" 2>&1 | tee "$OUT/pytest.log" | tail -40
timeout 120 python3 containers/check_seccomp_cuda.py 2>&1 | tee "$OUT/seccomp_cuda.log" | tail -20
if [ "${BENCH_S:-0}" -gt 0 ]; then
  timeout "$BENCH_S" python3 benchmarks/binding_cost.py 2>&1 | tee "$OUT/binding_cost.md"
fi
