"""Result replay keyed on a fingerprint of a few input values, held in a closure.

The key is the shape, eps and a dozen sampled elements (first and last row, first
weights). Cloning the inputs to fresh addresses before every timed call (the usual fix
for data_ptr replay) does not help: the clone has the same values, so the fingerprint
hits and the saved output is replayed. Only inputs that change between timed calls, or a
canary call that keeps the sampled elements and changes the rest, defeat it.

Source:
- https://github.com/flashinfer-ai/flashinfer-bench-starter-kit/issues/21 (output cache keyed on a lightweight input fingerprint)
"""

import triton
import triton.language as tl

BLOCK_ROWS = 16


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, stride_x, stride_out, eps,
                    HIDDEN: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, HIDDEN)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HIDDEN + eps)
    w = tl.load(w_ptr + cols)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


def _fingerprint(hidden_states, weight, eps):
    probes = (hidden_states[0, :4], hidden_states[-1, -4:], weight[:4])
    return (tuple(hidden_states.shape), float(eps),
            tuple(v for p in probes for v in p.tolist()))


def _make_entry():
    recent = {}

    def rmsnorm(hidden_states, weight, eps, output):
        key = _fingerprint(hidden_states, weight, eps)
        if key in recent:
            output.copy_(recent[key])
            return
        n_rows, hidden = hidden_states.shape
        grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
        _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                              hidden_states.stride(0), output.stride(0), float(eps),
                              HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS)
        recent.clear()
        recent[key] = output.clone()

    return rmsnorm


run = _make_entry()
