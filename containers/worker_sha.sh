#!/bin/bash
# The hash of what the worker image ships (sandboxharness/worker and sandboxharness/inputs),
# computed as sandbox/docker_config.py::worker_sha256 does: build.sh labels the image with it
# and the Docker backend refuses an image built from other sources.
set -euo pipefail
cd "$(dirname "$0")/../sandboxharness"
find worker inputs -name '*.py' -print | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
