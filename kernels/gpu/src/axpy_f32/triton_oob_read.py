"""PLANTED BUG: the load of x has no mask, so the last block reads past the end (memcheck).

The overrun stays inside the caching allocator's rounding in a normal run, so the outputs are
right; compute-sanitizer with the caching allocator off reports it.
"""
import triton
import triton.language as tl


@triton.jit
def _axpy(X, Y, Z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)  # BUG: no mask
    y = tl.load(Y + offs, mask=offs < n)
    tl.store(Z + offs, 2.0 * x + y, mask=offs < n)


def run(x, y, z):
    n = x.numel()
    _axpy[(triton.cdiv(n, 128),)](x, y, z, n, BLOCK=128)
