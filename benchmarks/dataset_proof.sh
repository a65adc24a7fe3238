#!/bin/bash
# One device call for issue 17 (run from the repo root on the GPU machine, carry .whl): the
# FIB trace set through FlashInfer-Bench's persistent runner and our `run --local` (default
# policy, audit log verified, traces read back by FlashInfer-Bench), then the dataset GPU
# tests (shared lane, clean windows, a foreign process flagged), and any extra device scripts
# named in $EXTRA (run first, each bounded). Everything lands under $OUT.
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
T0=$SECONDS
bash benchmarks/gpu_device_setup.sh > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
# shellcheck disable=SC1091
source .site/env.sh
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import flashinfer_bench; print('flashinfer_bench', flashinfer_bench.__version__)" 2>&1
  nproc; date -u; } | tee "$OUT/env.txt"
for x in ${EXTRA:-}; do
  echo "== $x" | tee -a "$OUT/extra.log"
  timeout "${EXTRA_S:-120}" bash "$x" >> "$OUT/extra.log" 2>&1; echo "rc=$?" | tee -a "$OUT/extra.log"
done
echo "setup+extra done at $((SECONDS - T0)) s"
timeout "${BENCH_S:-360}" python3 benchmarks/dataset_throughput.py --fib-set --fib \
  --jobs "${JOBS:-4}" --budget-s "$(( ${BENCH_S:-360} - 15 ))" --keep "$OUT/datasets" \
  2> "$OUT/throughput.err" | tee "$OUT/throughput.md"
echo "throughput done at $((SECONDS - T0)) s"; tail -5 "$OUT/throughput.err"
left=$(( ${TOTAL_S:-560} - (SECONDS - T0) ))
if [ "$left" -gt 60 ] && [ -n "${TESTS:-}" ]; then
  timeout "$left" python3 -m pytest -v -p no:cacheprovider -rs $TESTS 2>&1 \
    | tee "$OUT/pytest.log" | tail -25
fi
echo "all done at $((SECONDS - T0)) s"
