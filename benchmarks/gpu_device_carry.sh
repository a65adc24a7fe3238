#!/bin/bash
# Build .whl/site.tar.xz on the CPU machine: what benchmarks/gpu_validate.py needs on the device
# beyond its own torch/triton/CUDA (no package index there), as one `pip install --target` tree
# for CPython 3.12, xz-compressed. semgrep alone (its core binary) is ~50 MB compressed, so it
# travels in a carry of its own: .whl-semgrep/semgrep.tar.xz (first call, machine kept warm)
# and .whl/site.tar.xz (everything else, with the project, in the next call).
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d)
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312)
for p in manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  PLAT+=(--platform "$p")
done
pip install -q --no-compile --target "$T/site" "${PLAT[@]}" "semgrep==1.185.0" "bandit==1.9.4" \
  "pydantic>=2.7,<3" "pyyaml>=6" "rfc8785>=0.1.4" "structlog>=24" "cryptography>=42" \
  "pyseccomp>=0.1.2" "orjson>=3.9" "typing-extensions>=4.16" "nvidia-ml-py>=12"
# torch 2.11 (cu130) on the device already brings cuda-bindings and libcupti. A second
# `--target --upgrade` into the same tree would replace its bin/ (bandit, semgrep): merge instead
pip install -q --no-compile --no-deps --target "$T/extra" "${PLAT[@]}" \
  "cupti-python==13.0.1" apache-tvm-ffi flashinfer-bench "docstring-parser>=0.16"
cp -r "$T/extra/." "$T/site/"
# semgrep's own package and entry points go into a second tree (its dependencies stay here)
mkdir -p "$T/sg/site/bin"
mv "$T/site/semgrep" "$T"/site/semgrep-*.dist-info "$T/sg/site/"
mv "$T"/site/bin/*semgrep* "$T/sg/site/bin/"
rm -rf "$T/site/cupti-python-samples"
find "$T/site" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p .whl .whl-semgrep
tar -C "$T" -cf - site | xz -T0 -6 > .whl/site.tar.xz
tar -C "$T/sg" -cf - site | xz -T0 -6 > .whl-semgrep/semgrep.tar.xz
rm -rf "$T"
cp -L /usr/lib/x86_64-linux-gnu/libseccomp.so.2 .whl/ 2>/dev/null || true  # if the device lacks it
ls -l .whl/site.tar.xz .whl-semgrep/semgrep.tar.xz
