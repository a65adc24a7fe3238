"""TRICK: the honest kernel, launched on a side stream and never joined: a timer that
only records events on the current stream sees almost nothing. The stage synchronises the
whole device before its end mark, so the time counts (and the outputs are complete).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms(X, W, Y, H: tl.constexpr, EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, H)
    x = tl.load(X + row * H + offs).to(tl.float32)
    w = tl.load(W + offs).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + EPS)
    tl.store(Y + row * H + offs, (x * r * w).to(tl.bfloat16))


_SIDE = []


def run(hidden_states, weight, output):
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    side.wait_stream(torch.cuda.current_stream())
    rows, h = hidden_states.shape
    if rows:
        with torch.cuda.stream(side):
            _rms[(rows,)](hidden_states, weight, output, H=h, EPS=1e-5, num_warps=8)
    # returns while the work is still running on the side stream
