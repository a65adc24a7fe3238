#!/bin/bash
# Build, on the CPU machine, everything benchmarks/gpu_docker.sh needs on the GPU machine
# (no package index, no registry, no Docker there), under .carry/docker/ (git-ignored):
#   dockerbin.tar.xz   Debian bookworm's dockerd, containerd, containerd-shim-runc-v2, runc and
#                      tini-static (as docker-init), unpacked from their .deb files
#   libdevmapper.so.1.02.1   the one library dockerd needs that the device lacks
#   site.tar.xz        a `pip install --target` tree for CPython 3.12 with what the harness
#                      needs beyond the device's own torch/triton: pydantic, cryptography, ...,
#                      the Docker SDK, cupti-python, apache-tvm-ffi. No bandit/semgrep (43 MB):
#                      the red-team cases then run with the analysers off, as gpu_validate says
#   libseccomp.so.2    for pyseccomp where the device lacks it
# Prints each size and the total with the project's tracked files: one device call carries
# at most 64 MiB (`carry: [".carry/docker"]`, nothing else needed).
#   benchmarks/docker_carry.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.carry/docker
mkdir -p "$OUT"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# -- the engine, from Debian's packages (what MACHINES.md saw start on the H200) -------------
if [ -s "$OUT/dockerbin.tar.xz" ] && [ -s "$OUT/libdevmapper.so.1.02.1" ]; then
  echo "engine binaries already in $OUT (remove them to rebuild)"
else
(cd "$T" && apt-get download docker.io containerd runc tini libdevmapper1.02.1 >/dev/null)
mkdir -p "$T/x" "$T/engine/bin"
for deb in "$T"/*.deb; do dpkg-deb -x "$deb" "$T/x"; done
for f in usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/sbin/dockerd usr/sbin/runc; do
  install -m 0755 "$T/x/$f" "$T/engine/bin/"
done
install -m 0755 "$T/x/usr/bin/tini-static" "$T/engine/bin/docker-init"
tar -C "$T/engine" -cf - bin | xz -T0 -6 > "$OUT/dockerbin.tar.xz.part"
mv "$OUT/dockerbin.tar.xz.part" "$OUT/dockerbin.tar.xz"
cp -L "$T"/x/lib/x86_64-linux-gnu/libdevmapper.so.1.02.1 "$OUT/"
fi

# -- Python packages for the device's 3.12 ---------------------------------------------------
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312)
for p in manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  PLAT+=(--platform "$p")
done
python3 -m pip install -q --no-compile --target "$T/site" "${PLAT[@]}" \
  "pydantic>=2.7,<3" "rfc8785>=0.1.4" "structlog>=24" "cryptography>=42" "pyseccomp>=0.1.2" \
  "orjson>=3.9" "typing-extensions>=4.16" "docker>=7.1"
pip install -q --no-compile --no-deps --target "$T/extra" "${PLAT[@]}" \
  "cupti-python==13.0.1" apache-tvm-ffi
cp -r "$T/extra/." "$T/site/"
rm -rf "$T/site/cupti-python-samples"
find "$T/site" -name __pycache__ -prune -exec rm -rf {} +
tar -C "$T" -cf - site | xz -T0 -8 > "$OUT/site.tar.xz.part"
mv "$OUT/site.tar.xz.part" "$OUT/site.tar.xz"
cp -L /usr/lib/x86_64-linux-gnu/libseccomp.so.2 "$OUT/"

ls -l "$OUT"
carry=$(du -cb "$OUT"/* | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | awk '/total$/ {s += $1} END {print s}')
printf 'carry %.1f MiB + tracked tree %.1f MiB = %.1f MiB (limit 64 MiB)\n' \
  "$(echo "$carry / 1048576" | bc -l)" "$(echo "$tree / 1048576" | bc -l)" \
  "$(echo "($carry + $tree) / 1048576" | bc -l)"
