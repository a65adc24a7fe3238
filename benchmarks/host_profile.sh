#!/bin/bash
# One device call: where one candidate's wall time goes on the host, for the FIB full
# workload sets (rmsnorm_h4096's honest Triton solution, 14 workloads; FIB's gemm example,
# gemm_n4096_k4096, 43 workloads): `evaluate` under cProfile (the host's time blocked on each
# worker op is the worker's time), cut by SIGINT at PROFILE_S so the profile is still written.
# Semgrep off (its carry travels separately). Everything lands under $OUT (tarred).
set -uo pipefail
OUT=${OUT:-profile-out}
mkdir -p "$OUT"
T0=$SECONDS
bash benchmarks/gpu_device_setup.sh > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
# shellcheck disable=SC1091
source .site/env.sh
export PYTHONUNBUFFERED=1
DS=$(python3 -c 'import sys, tempfile; sys.path.insert(0, "benchmarks")
from pathlib import Path; from dataset_throughput import build_fib_set
print(build_fib_set(Path(tempfile.mkdtemp())))')
sed 's/^\(\s*\)semgrep: true/\1semgrep: false/' policies/default.yaml > "$OUT/policy.yaml"
one() {  # name definition solution
  timeout -s INT "${PROFILE_S:-200}" python3 -m cProfile -o "$OUT/$1.prof" \
    -m sandboxharness.cli evaluate --definition "$DS/definitions/$2.json" \
    --workloads "$DS/workloads/$2.jsonl" --solution "$DS/solutions/$3.json" \
    --policy "$OUT/policy.yaml" --seed 1 --json > "$OUT/$1.json" 2> "$OUT/$1.err"
  echo "$1 rc $? at $((SECONDS - T0)) s"
}
one gemm gemm/gemm_n4096_k4096 gemm/gemm_n4096_k4096/example_agent_solution &
one rms rmsnorm/rmsnorm_h4096 rmsnorm/rmsnorm_h4096/triton_honest &
wait
for n in gemm rms; do
  echo "== $n"; tail -c 3000 "$OUT/$n.err"
  python3 - "$OUT/$n.json" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as exc:  # cut off: no verdict
    print("no verdict:", exc); raise SystemExit
print(v.get("decision"), [(r.get("code"), r.get("message", "")[:600]) for r in v.get("reasons", [])])
for s in v.get("stages", []):
    print(s.get("stage"), s.get("status"), round(s.get("duration_s", 0), 1),
          str(s.get("details", {}).get("log_tail", ""))[-1500:])
PY
  python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(45)" \
    "$OUT/$n.prof" 2>&1 | tail -60
done
tar -czf "$OUT/all.tgz" -C "$OUT" . 2>/dev/null
echo "done at $((SECONDS - T0)) s"
