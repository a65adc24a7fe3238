#!/bin/bash
# Real Nsight Compute output for the profile parser's tests (issue 11, item 1). Run from the
# repo root on the GPU machine with ncu on PATH; needs only python3 with torch and triton (no
# harness dependencies: the ncu options come from sandboxharness/profile/metrics.py, loaded
# by path). Writes under $OUT/ncu/: per capture NAME.cmd (the exact command line), NAME.csv
# (ncu's --log-file: what the profile stage parses), NAME.stdout/.stderr, and ORIGIN.txt;
# prints a table of what the stdlib parser read. Takes ~60 s.
set -uo pipefail
OUT=${OUT:-ncu-out}
DEST="$OUT/ncu"
mkdir -p "$DEST"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1 LC_ALL=C TRITON_CACHE_DIR="$WORK/triton"
NCU=$(command -v ncu) || { echo "ncu not on PATH"; exit 1; }
{ echo "captured: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  "$NCU" --version 2>&1 | tail -1
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$DEST/ORIGIN.txt"

# -- the workloads: each profiles its calls as the worker does (cudaProfilerStart, the marker
#    kernel torch.cuda._sleep, the call, cudaProfilerStop), after one unprofiled warm-up call
cat > "$WORK/common.py" <<'PY'
import sys
import torch

def profiled(fn, *args):
    fn(*args)  # warm-up: compiles, autotunes; not profiled
    torch.cuda.synchronize()
    rt = torch.cuda.cudart()
    rt.cudaProfilerStart()
    torch.cuda._sleep(1)  # the call marker
    fn(*args)
    torch.cuda.synchronize()
    rt.cudaProfilerStop()
PY
cat > "$WORK/rmsnorm.py" <<'PY'
import sys
import torch, triton, triton.language as tl
from common import profiled

@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * n_cols + cols, (x * r * w).to(tl.float16), mask=mask)

def rmsnorm(x, w, y):
    rmsnorm_kernel[(x.shape[0],)](x, w, y, x.shape[1], 1e-6, BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=8)

sizes = [int(s) for s in sys.argv[1:]] or [16384]
for rows in sizes:  # one profiled call per size: the multi-call capture checks the markers
    x = torch.randn(rows, 4096, device="cuda", dtype=torch.float16)
    w = torch.randn(4096, device="cuda", dtype=torch.float16)
    profiled(rmsnorm, x, w, torch.empty_like(x))
PY
cat > "$WORK/matmul.py" <<'PY'
import torch
from common import profiled
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
profiled(torch.matmul, a, b)
PY
cat > "$WORK/tiny.py" <<'PY'
import torch
from common import profiled
x = torch.ones(32, device="cuda")
profiled(torch.add, x, x)
PY

mapfile -t OPTS < <(python3 - "$DEST" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("m", "sandboxharness/profile/metrics.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print("\n".join(m.ncu_options(launch_count=64, log_file="LOGFILE")))
PY
)

capture() {  # NAME PAGE SCRIPT ARGS...: one ncu run; PAGE raw (the stage's) or details
  local name=$1 page=$2; shift 2
  local opts=("${OPTS[@]/LOGFILE/$DEST/$name.csv}")
  if [ "$page" = details ]; then  # the default page: drop "--page raw"
    local keep=() skip=0
    for o in "${opts[@]}"; do
      if [ $skip = 1 ]; then skip=0; continue; fi
      if [ "$o" = --page ]; then skip=1; continue; fi
      keep+=("$o")
    done
    opts=("${keep[@]}")
  fi
  local cmd=("$NCU" "${opts[@]}" python3 "$WORK/$1" "${@:2}")
  printf '%q ' "${cmd[@]}" | sed "s#$WORK/#WORK/#g; s#$DEST/#\$OUT/ncu/#g" > "$DEST/$name.cmd"
  echo >> "$DEST/$name.cmd"
  local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ $left -gt 30 ] && left=30
  [ $left -lt 1 ] && { echo "$name: not run (time budget spent)" >> "$DEST/ORIGIN.txt"; return; }
  (cd "$WORK" && timeout "$left" "${cmd[@]}") > "$DEST/$name.stdout" 2> "$DEST/$name.stderr"
  echo "$name: rc=$? $((SECONDS - t0)) s" >> "$DEST/ORIGIN.txt"
}

DEADLINE=$((SECONDS + 80))  # the whole script stays under 90 s
capture rmsnorm_memory raw rmsnorm.py
capture matmul_compute raw matmul.py
capture tiny_launch raw tiny.py
capture rmsnorm_three_calls raw rmsnorm.py 64 2048 16384
capture rmsnorm_details details rmsnorm.py 4096

# -- the table: what the (stdlib-only) parser reads from each capture
python3 - "$DEST" <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.spec_from_file_location("p", "sandboxharness/profile/ncu_parse.py")
p = importlib.util.module_from_spec(spec); sys.modules["p"] = p; spec.loader.exec_module(p)
dest = pathlib.Path(sys.argv[1])
print(f"{'capture':22} {'layout':8} {'id':>3} {'kernel':44} {'us':>9} {'sm%':>6} {'mem%':>6} {'occ%':>6}")
for csv in sorted(dest.glob("*.csv")):
    try:
        rep = p.parse(csv.read_text(errors="replace"))
    except p.NcuParseError as exc:
        print(f"{csv.stem:22} PARSE ERROR: {exc}"); continue
    for e in rep.errors:
        print(f"{csv.stem:22} ncu: {e}")
    for r in rep.rows:
        g = r.metrics.get
        us = g("gpu__time_duration.sum", float("nan")) / 1e3
        print(f"{csv.stem:22} {rep.layout:8} {r.id:>3} {r.name[:44]:44} {us:9.2f} "
              f"{g('sm__throughput.avg.pct_of_peak_sustained_elapsed', float('nan')):6.1f} "
              f"{g('gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed', float('nan')):6.1f} "
              f"{g('sm__warps_active.avg.pct_of_peak_sustained_active', float('nan')):6.1f}")
PY
cat "$DEST/ORIGIN.txt"
