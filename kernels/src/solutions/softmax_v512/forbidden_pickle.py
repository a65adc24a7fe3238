"""Forbidden: unpickles an embedded tuning blob.

The blob is harmless here, but pickle.loads is arbitrary code execution on
untrusted bytes (bandit B301/B403); static analysis must reject it.
"""

import base64
import pickle

import triton
import triton.language as tl

_TUNED = pickle.loads(base64.b64decode("gASVHwAAAAAAAAB9lCiMB0JMT0NLX1KUSwiMCW51bV93YXJwc5RLBHUu"))


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, stride_x, stride_out,
                    V: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, V)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


def run(logits, probs):
    n_rows, vocab = logits.shape
    grid = (triton.cdiv(n_rows, _TUNED["BLOCK_R"]),)
    _softmax_kernel[grid](logits, probs, n_rows, logits.stride(0), probs.stride(0),
                          V=vocab, BLOCK_R=_TUNED["BLOCK_R"])
