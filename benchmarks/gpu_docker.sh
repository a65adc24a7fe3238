#!/bin/bash
# One device call: the hardened Docker backend runs every GPU stage on the GPU machine, side
# by side with the process backend (issue 13). Run from the repo root on the device, with
# .carry/docker/ carried (benchmarks/docker_carry.sh builds it on the CPU machine):
#   OUT=$OUT bash benchmarks/gpu_docker.sh          # ~8-9 min; everything lands under $OUT
# 1. the Python packages (.carry/docker/site.tar.xz through benchmarks/gpu_device_setup.sh);
# 2. the engine from the carried binaries: containerd, then dockerd (no bridge, no iptables);
# 3. the offline worker image (containers/build_offline.py --gpu): a skeleton root imported
#    with `docker import`, the host's runtime bound read-only, pinned by id;
# 4. benchmarks/gpu_docker_compare.py: a probe job, every verdict case through both backends,
#    timings docker vs process (gpu_docker.md);
# 5. the escape suite through Docker with GPU jobs (escape_docker.log), in the time left.
set -uo pipefail
OUT=${OUT:-gpu-docker-out}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
T0=$SECONDS
step() { printf '[gpu_docker %4ds] %s\n' $((SECONDS - T0)) "$*" | tee -a "$OUT/steps.log"; }
C=.carry/docker

# -- 1. Python packages ------------------------------------------------------------------------
if [ ! -f .whl/site.tar.xz ]; then
  mkdir -p .whl && cp "$C/site.tar.xz" "$C/libseccomp.so.2" .whl/
fi
bash benchmarks/gpu_device_setup.sh > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
# a .whl/ left on the device by an earlier call may lack the Docker SDK: merge ours in
tar -C . -xJf "$C/site.tar.xz" --transform 's,^site,.site,'
python3 -c 'import docker, sandboxharness.sandbox.docker; print("docker SDK", docker.__version__)' \
  >> "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
# shellcheck disable=SC1091
source .site/env.sh
export PYTHONUNBUFFERED=1
step "python ready: $(tail -1 "$OUT/setup.log")"

# -- 2. the engine -----------------------------------------------------------------------------
D=/tmp/shx-docker
mkdir -p "$D/bin" "$D/lib"
tar -C "$D" -xJf "$C/dockerbin.tar.xz" && cp "$C/libdevmapper.so.1.02.1" "$D/lib/"
export PATH=$D/bin:$PATH   # dockerd finds runc, the shim and docker-init here
if [ ! -S /var/run/docker.sock ]; then
  LD_LIBRARY_PATH=$D/lib setsid containerd > "$OUT/containerd.log" 2>&1 < /dev/null &
  echo $! > "$OUT/containerd.pid"
  for _ in $(seq 1 30); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.5; done
  LD_LIBRARY_PATH=$D/lib setsid dockerd --containerd=/run/containerd/containerd.sock \
    --iptables=false --ip-forward=false --bridge=none > "$OUT/dockerd.log" 2>&1 < /dev/null &
  echo $! > "$OUT/dockerd.pid"
  for _ in $(seq 1 60); do [ -S /var/run/docker.sock ] && break; sleep 0.5; done
fi
python3 - > "$OUT/engine.json" 2>&1 <<'PY'
import json, docker
c = docker.from_env(version="auto", timeout=60)
i = c.api.info()
print(json.dumps({k: i.get(k) for k in ("ServerVersion", "Driver", "CgroupVersion", "CgroupDriver",
                                        "Runtimes", "SecurityOptions", "KernelVersion")}, indent=1))
PY
step "engine: $(tr -d '\n' < "$OUT/engine.json" | cut -c1-300)"

# -- 3. the offline image ------------------------------------------------------------------------
export SANDBOXHARNESS_DOCKER_IMAGE=sandboxharness-worker:host
python3 containers/build_offline.py --gpu --json --tag "$SANDBOXHARNESS_DOCKER_IMAGE" \
  > "$OUT/image.json" 2> "$OUT/image.err"
step "image: rc $? $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["id"], "binds", d["binds"], "missing", d["missing"])' "$OUT/image.json" 2>&1 | cut -c1-600)"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git rev-parse --short HEAD 2>/dev/null || true
  date -u; } > "$OUT/env.txt" 2>&1

# -- 4. docker vs process -------------------------------------------------------------------------
left=$((BUDGET_S - (SECONDS - T0) - 110))
timeout "$left" python3 benchmarks/gpu_docker_compare.py --out "$OUT" --budget-s $((left - 10)) \
  > "$OUT/compare.log" 2>&1
step "compare: rc $? (gpu_docker.md)"
grep -E "^\[|^\| " "$OUT/compare.log" | tail -80

# -- 5. the escape suite through Docker (GPU jobs) ----------------------------------------------
left=$((BUDGET_S - (SECONDS - T0) - 15))
if [ "$left" -gt 30 ]; then
  timeout "$left" python3 -m pytest -q -p no:cacheprovider -rs tests/escape/test_escape.py \
    -k docker > "$OUT/escape_docker.log" 2>&1
  step "escape suite (docker): rc $? $(tail -1 "$OUT/escape_docker.log")"
fi
python3 - > "$OUT/leftover.txt" 2>&1 <<'PY'
import docker
c = docker.from_env(version="auto", timeout=30)
left = c.api.containers(all=True, filters={"label": "sandboxharness.job"})
print("containers left behind:", [x["Names"] for x in left])
PY
cat "$OUT/leftover.txt"
for p in dockerd containerd; do
  [ -f "$OUT/$p.pid" ] && kill "$(cat "$OUT/$p.pid")" 2>/dev/null
done
step "done"
