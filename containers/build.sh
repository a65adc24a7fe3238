#!/usr/bin/env bash
# Build the worker image the Docker backend runs, and print its id (sha256:..., the digest
# the backend pins and the verdict records).
#
#   containers/build.sh          CPU test image (default tag sandboxharness-worker:cpu)
#   containers/build.sh --gpu    production CUDA image (sandboxharness-worker:gpu); needs a
#                                registry for the nvidia/cuda base and the package index for
#                                the CUDA wheels, so it cannot be built on the offline CPU
#                                machine (there: only the CPU test image)
#
# CPU image, no registry needed:
#   1. base sandboxharness-base:bookworm from Debian's packages (debootstrap + docker import),
#      built once; mirror from this machine's apt sources (or SHX_DEBIAN_MIRROR)
#   2. wheels (containers/requirements-cpu.txt) fetched once with `pip download --no-deps`
#      into $SHX_BUILD_CACHE/wheels on the host (pip's own config: cert, mirrors, local
#      wheel dirs); the image installs them with --no-index, so the build needs no network
#   3. docker build with the staged context (wheels + the worker package only)
# Idempotent: a re-run with nothing changed takes seconds (every step is cached).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SHX_BUILD_CACHE:-/var/cache/sandboxharness-build}
BASE_TAG=sandboxharness-base:bookworm
PYTHON=${PYTHON:-python3}
GPU=0
for arg in "$@"; do
    case "$arg" in
        --gpu) GPU=1 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done
if [ "$GPU" = 1 ]; then
    TAG=${SANDBOXHARNESS_DOCKER_IMAGE_GPU:-sandboxharness-worker:gpu}
else
    TAG=${SANDBOXHARNESS_DOCKER_IMAGE:-sandboxharness-worker:cpu}
fi
T0=$SECONDS
step() { printf '[build %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/ci_docker_setup.sh)"
mkdir -p "$CACHE"

# The build context: the worker and inputs packages and a stub package root, nothing else of
# the harness.
stage_worker() {
    local ctx=$1 pkg
    rm -rf "$ctx/worker"
    mkdir -p "$ctx/worker"
    printf '"""Worker-only install: the harness itself is not in this image."""\n' \
        >"$ctx/worker/__init__.py"
    for pkg in worker inputs; do
        mkdir -p "$ctx/worker/$pkg"
        (cd "$REPO/sandboxharness/$pkg" && find . -name '*.py' -print0 \
            | xargs -0 -I{} cp --parents {} "$ctx/worker/$pkg/")
    done
}

debian_mirror() {
    if [ -n "${SHX_DEBIAN_MIRROR:-}" ]; then echo "$SHX_DEBIAN_MIRROR"; return; fi
    # the URI that serves suite "bookworm" itself (not -security, not third-party suites)
    "$PYTHON" - <<'PY'
import glob, re, sys
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        f = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if "deb" in f.get("Types", "").split() and "bookworm" in f.get("Suites", "").split():
            print(f["URIs"].split()[0]); sys.exit(0)
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        parts = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
        if len(parts) >= 3 and parts[0] == "deb" and parts[2] == "bookworm":
            print(parts[1]); sys.exit(0)
sys.exit("no apt source serves bookworm: set SHX_DEBIAN_MIRROR")
PY
}

build_base() {
    if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
        step "base $BASE_TAG present"
        return
    fi
    command -v debootstrap >/dev/null || die "debootstrap is not installed"
    local mirror rootfs
    mirror=$(debian_mirror)
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
    trap "rm -rf '$rootfs'" EXIT
    step "debootstrap bookworm from $mirror"
    debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$mirror" \
        >"$CACHE/debootstrap.log" 2>&1 || { tail -n 20 "$CACHE/debootstrap.log" >&2;
                                           rm -rf "$rootfs"; die "debootstrap failed"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'CMD ["/bin/bash"]' \
        - "$BASE_TAG" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
    step "imported $BASE_TAG"
}

fetch_wheels() {
    local dir=$CACHE/wheels missing=0 req name ver
    mkdir -p "$dir"
    while read -r req; do
        req=${req%%#*}; req=${req//[[:space:]]/}
        [ -n "$req" ] || continue
        name=${req%%==*}; ver=${req##*==}
        name=${name,,}
        compgen -G "$dir/${name//-/_}-${ver}[-+]*.whl" >/dev/null || missing=1
    done <"$REPO/containers/requirements-cpu.txt"
    if [ "$missing" = 0 ]; then
        step "wheels cached in $dir"
        return
    fi
    step "pip download -> $dir"
    # the image's python is bookworm's 3.11 on x86_64: ask for exactly those wheels
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.11 --implementation cp --abi cp311 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -r "$REPO/containers/requirements-cpu.txt" -d "$dir"
}

build_cpu() {
    build_base
    fetch_wheels
    local ctx=$CACHE/context-cpu
    mkdir -p "$ctx/wheels"
    # hard links: no copy of ~1 GB of wheels per build (same filesystem as the cache)
    find "$ctx/wheels" -mindepth 1 -delete
    ln "$CACHE"/wheels/*.whl "$ctx/wheels/" 2>/dev/null || cp "$CACHE"/wheels/*.whl "$ctx/wheels/"
    stage_worker "$ctx"
    step "docker build $TAG"
    docker build -q --force-rm -f "$REPO/containers/Dockerfile.cpu-test" --build-arg BASE="$BASE_TAG" \
        --label "sandboxharness.worker-sha256=$WORKER_SHA" \
        -t "$TAG" "$ctx" >/dev/null
}

build_gpu() {
    local ctx=$CACHE/context-gpu
    mkdir -p "$ctx"
    stage_worker "$ctx"
    step "docker build $TAG (needs registry + package index access)"
    docker build -q --force-rm -f "$REPO/containers/Dockerfile.gpu" \
        ${CUDA_BASE:+--build-arg CUDA_BASE="$CUDA_BASE"} \
        --label "sandboxharness.worker-sha256=$WORKER_SHA" \
        -t "$TAG" "$ctx" >/dev/null
}

# the shipped sources' hash, as DockerSandbox computes it: a stale image is refused, not used
WORKER_SHA=$("$REPO/containers/worker_sha.sh")
if [ "$GPU" = 1 ]; then build_gpu; else build_cpu; fi
id=$(docker image inspect -f '{{.Id}}' "$TAG")
size=$(docker image inspect -f '{{.Size}}' "$TAG")
step "built $TAG: $id ($((size / 1024 / 1024)) MiB)"
printf '%s %s\n' "$TAG" "$id"
