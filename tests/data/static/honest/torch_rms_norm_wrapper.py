"""Honest control: RMSNorm as a thin wrapper over torch.nn.functional.rms_norm (plain Python)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

EPS = 1e-5
fn = torch.nn.functional  # a plain alias of a module is followed, not an escape


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    h = hidden_states.shape[-1]
    out = F.rms_norm(hidden_states.float(), (h,), weight.float(), eps=EPS)
    return out.to(hidden_states.dtype)


def run_dps(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:
    output.copy_(fn.rms_norm(hidden_states.float(), (hidden_states.shape[-1],),
                             weight.float(), eps=EPS))
