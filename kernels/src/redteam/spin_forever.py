"""A kernel that spins forever waiting for a signal that never comes.

A "persistent" softmax kernel waits on a ready flag in device memory before it starts;
nothing ever sets the flag, so the launch never returns (on a GPU the kernel occupies the
device until the process is killed). The harness must enforce its wall-clock limit,
kill the whole process group and report TIMEOUT, then carry on with the next candidate.

Source:
- https://attack.mitre.org/techniques/T1499/ (endpoint denial of service)
"""

import torch
import triton
import triton.language as tl

BLOCK_R = 8


@triton.jit
def _persistent_softmax_kernel(x_ptr, out_ptr, ready_ptr, n_rows, stride_x, stride_out,
                               V: tl.constexpr, BLOCK_R: tl.constexpr):
    while tl.load(ready_ptr, volatile=True) == 0:
        pass
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, V)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :],
             e / tl.sum(e, axis=1)[:, None], mask=mask)


def run(logits, probs):
    n_rows, vocab = logits.shape
    ready = torch.zeros(1, dtype=torch.int32, device=logits.device)
    grid = (triton.cdiv(n_rows, BLOCK_R),)
    _persistent_softmax_kernel[grid](logits, probs, ready, n_rows, logits.stride(0),
                                     probs.stride(0), V=vocab, BLOCK_R=BLOCK_R)
