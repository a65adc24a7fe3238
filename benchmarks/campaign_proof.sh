#!/bin/bash
# One device call for issue 11's proof (run from the repo root on the GPU machine; carry .whl
# and, for the default policy's semgrep, .whl-semgrep): a triton-params campaign on FIB's
# rmsnorm_h4096 (14 workloads) from kernels/gpu's weak Triton kernel, at most 8 rounds within
# BUDGET_S (default 420 s; no round starts with less than ROUND_RESERVE_S, default 120 s,
# left), then the per-round table and `audit verify`. Set-up (gpu_device_setup.sh) runs here
# only if .site/env.sh is not there yet (then ~1 min more: lower BUDGET_S). The campaign lives
# in $WORK (default /tmp/campaign-proof); on a machine still warm, RESUME=1 continues it.
# Other knobs: ROUND_RESERVE_S, JOBS (4: the best + 3 candidates at once), SEED. Results: $OUT.
set -uo pipefail
OUT=${OUT:-campaign-out}
mkdir -p "$OUT"
T0=$SECONDS
if [ ! -f .site/env.sh ]; then
  bash benchmarks/gpu_device_setup.sh > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
fi
# shellcheck disable=SC1091
source .site/env.sh
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  for t in ncu compute-sanitizer semgrep bandit; do echo "$t: $(command -v "$t" || echo absent)"; done
  git log -1 --format='commit %h %s' 2>/dev/null
  nproc; date -u; } | tee "$OUT/env.txt"
echo "setup done at $((SECONDS - T0)) s"
BUDGET_S=${BUDGET_S:-420}
# the script stops the campaign itself at BUDGET_S; this outer bound is only a backstop
timeout $((BUDGET_S + 90)) python3 benchmarks/campaign_proof.py --out "$OUT" \
  --budget-s "$BUDGET_S" --reserve-s "${ROUND_RESERVE_S:-120}" --jobs "${JOBS:-4}" \
  2> "$OUT/proof.err"
echo "proof exit $? at $((SECONDS - T0)) s"; tail -5 "$OUT/proof.err"
