"""Deliberately weak but honest RMSNorm (hidden 4096, bf16 in/out, fp32 math, eps 1e-5), DPS.

The starting point of the campaign proof: each program walks its row twice in BLOCK-wide
chunks (sum of squares, then scale) with one warp. BLOCK and num_warps are plain integer
literals so the triton-params search can rewrite them; any power-of-two BLOCK stays correct
(the mask covers a chunk wider than the row)."""
import triton
import triton.language as tl

BLOCK = 64


@triton.jit
def _rms(X, W, Y, H: tl.constexpr, EPS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(X + row * H + offs, mask=offs < H, other=0.0).to(tl.float32)
        acc += x * x
    r = tl.rsqrt(tl.sum(acc, axis=0) / H + EPS)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        keep = offs < H
        x = tl.load(X + row * H + offs, mask=keep, other=0.0).to(tl.float32)
        w = tl.load(W + offs, mask=keep, other=0.0).to(tl.float32)
        tl.store(Y + row * H + offs, (x * r * w).to(tl.bfloat16), mask=keep)


def run(hidden_states, weight, output):
    rows, h = hidden_states.shape
    if rows:
        _rms[(rows,)](hidden_states, weight, output, H=h, EPS=1e-5, BLOCK=BLOCK, num_warps=1)
