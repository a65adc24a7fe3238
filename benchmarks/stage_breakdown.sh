#!/bin/bash
# One device call: real ncu captures for the profile parser's tests (tarred: a call returns
# few files), then where one candidate's time goes on the full FIB workload sets: `run --local`
# on the honest Triton rmsnorm (rmsnorm_h4096, 14 workloads) and FIB's gemm example
# (gemm_n4096_k4096, 43 workloads), with the stage events logged to $OUT/events.jsonl.
# POLICY_SED edits the default policy (e.g. semgrep off where its carry does not fit).
set -uo pipefail
OUT=${OUT:-breakdown-out}
mkdir -p "$OUT"
T0=$SECONDS
bash benchmarks/gpu_device_setup.sh > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
# shellcheck disable=SC1091
source .site/env.sh
export PYTHONUNBUFFERED=1
if [ "${NCU:-1}" = 1 ]; then
  OUT=/tmp/shx-ncu timeout 100 bash benchmarks/ncu_capture.sh > "$OUT/ncu.log" 2>&1
  tar -czf "$OUT/ncu.tgz" -C /tmp/shx-ncu ncu
  echo "ncu done at $((SECONDS - T0)) s"; tail -12 "$OUT/ncu.log"
fi
DS=$(python3 -c 'import sys, tempfile; sys.path.insert(0, "benchmarks")
from pathlib import Path; from dataset_throughput import build_fib_set
print(build_fib_set(Path(tempfile.mkdtemp())))')
sed "${POLICY_SED:-s/^name: default/name: default/}" policies/default.yaml > "$OUT/policy.yaml"
left=$(( ${TOTAL_S:-480} - (SECONDS - T0) ))
timeout "$left" python3 -m sandboxharness.cli run --local "$DS" --policy "$OUT/policy.yaml" \
  --solutions "${SOLUTIONS:-rmsnorm_h4096__triton_honest,example_agent_solution}" \
  --jobs "${JOBS:-2}" --seed 1 --json --log-file "$OUT/events.jsonl" --log-level info \
  > "$OUT/run.json" 2> "$OUT/run.err"
echo "run rc $? at $((SECONDS - T0)) s"; tail -5 "$OUT/run.err"
python3 - "$OUT/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] in ("stage.end", "candidate.end", "candidate.error"):
        print(e["timestamp"][11:19], e["solution"][:40], e["event"], e.get("stage", ""),
              e.get("status", ""), e.get("duration_s", e.get("wall_s", "")), e.get("reasons", ""),
              e.get("tool_wall_s", ""))
PY
