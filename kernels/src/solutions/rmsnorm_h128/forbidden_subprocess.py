"""Forbidden: picks its block size by shelling out to nvidia-smi.

Numerically it is the honest kernel; the subprocess call at import time is what
static analysis must reject (bandit B404/B603/B607, import policy).
"""

import subprocess

import triton
import triton.language as tl

EPS = 1e-6


def _gpu_name():
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=5)
        return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


BLOCK_ROWS = 32 if "H200" in _gpu_name() else 16


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, stride_x, stride_out, eps,
                    HIDDEN: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, HIDDEN)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HIDDEN + eps)
    w = tl.load(w_ptr + cols).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


def run(hidden_states, weight, output):
    n_rows, hidden = hidden_states.shape
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                          hidden_states.stride(0), output.stride(0), EPS,
                          HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS)
