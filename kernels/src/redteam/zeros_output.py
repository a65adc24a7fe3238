"""All-zeros output: returns torch.zeros of the right shape and dtype.

The cheapest possible "kernel". It gets past a harness that only checks that the call
returns a tensor of the right shape and dtype and measures its time, and one whose
reference inputs happen to produce zeros (see zero_inputs_zero_output).

Source:
- https://www.wafer.ai/blog/reward-hacks-field-guide (returning garbage / constant outputs)
"""

import torch


def run(hidden_states, weight):
    return torch.zeros_like(hidden_states)
