"""TRICK: an honest axpy that stalls forever when it sees compute-sanitizer (its injection
library, or the caching allocator switched off as a sanitizer run does). A harness that waits
for the sanitizer never decides; ours must reject it with TIMEOUT."""
import os
import time

import triton
import triton.language as tl


@triton.jit
def _axpy(X, Y, Z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Z + offs, 2.0 * tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


def _watched():
    return ("CUDA_INJECTION64_PATH" in os.environ
            or os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1")


def run(x, y, z):
    while _watched():
        time.sleep(1.0)
    n = x.numel()
    _axpy[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
