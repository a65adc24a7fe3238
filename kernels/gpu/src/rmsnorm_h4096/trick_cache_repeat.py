"""TRICK: memoise the output by input address (+ shape): a benchmark that re-times the same
input tensors replays a copy instead of computing. The stage gives every timed call inputs at
addresses the candidate never saw, so this never hits (and sampled re-checks would catch a
stale replay); its time must not come out below the honest kernel's.
"""
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def _rms(X, W, Y, H: tl.constexpr, EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, H)
    x = tl.load(X + row * H + offs).to(tl.float32)
    w = tl.load(W + offs).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + EPS)
    tl.store(Y + row * H + offs, (x * r * w).to(tl.bfloat16))


def run(hidden_states, weight, output):
    key = (hidden_states.data_ptr(), weight.data_ptr(), tuple(hidden_states.shape))
    hit = _CACHE.get(key)
    if hit is not None:
        output.copy_(hit)
        return
    rows, h = hidden_states.shape
    if rows:
        _rms[(rows,)](hidden_states, weight, output, H=h, EPS=1e-5, num_warps=8)
    if len(_CACHE) < 64:
        _CACHE[key] = output.clone()
