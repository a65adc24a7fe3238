"""FlashInfer-Bench's sampling evaluator, on the trusted side: validity mask per sample, then
total variation distance over many samples per row."""

from __future__ import annotations

import pytest
import torch

from sandboxharness.errors import InputError
from sandboxharness.models import Definition
from sandboxharness.models.policy import SamplingRules
from sandboxharness.models.verdict import ReasonCode
from sandboxharness.stages.sampling import judge_sampling, thresholding, valid_mask

V, B, N = 16, 3, 4000


def _sampler(name: str = "top_k_sampling_from_probs_v16") -> Definition:
    return Definition.model_validate({
        "name": name, "op_type": "sampling",
        "axes": {"batch_size": {"type": "var"}, "vocab_size": {"type": "const", "value": V}},
        "inputs": {"probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"},
                   "top_k": {"shape": ["batch_size"], "dtype": "int32"},
                   "top_p": {"shape": ["batch_size"], "dtype": "float32"}},
        "outputs": {"samples": {"shape": ["batch_size"], "dtype": "int64"}},
        "reference": "def run(probs, top_k, top_p):\n    pass\n"})


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(B, V, generator=g), dim=-1)
    return {"probs": probs, "top_k": torch.tensor([4, 1, 6], dtype=torch.int32),
            "top_p": torch.tensor([0.5, 0.9, 0.3])}


def _draw(probs: torch.Tensor, k: torch.Tensor, n: int, seed: int = 1) -> torch.Tensor:
    """n calls of a top-k sampler: [n, B] samples."""
    g = torch.Generator().manual_seed(seed)
    out = torch.empty(n, probs.shape[0], dtype=torch.int64)
    for i in range(probs.shape[0]):
        top = torch.topk(probs[i], int(k[i])).indices
        w = torch.zeros(V).index_fill_(0, top, 1.0) * probs[i]
        out[:, i] = torch.multinomial(w, n, replacement=True, generator=g)
    return out


def _judge(samples: torch.Tensor, rules: SamplingRules | None = None):  # type: ignore[no-untyped-def]
    ins = _inputs()
    return judge_sampling(_sampler(), "samples", samples[0], samples[0], inputs=ins,
                          rules=rules or SamplingRules(), repeats=samples[1:])


def test_an_honest_top_k_sampler_passes_mask_and_distribution() -> None:
    ins = _inputs()
    res = _judge(_draw(ins["probs"], ins["top_k"], N))
    assert res.code is None, res.message
    assert res.extra["distribution_checked"] and res.extra["tvd"] < 0.05


def test_a_top_k_plus_one_sampler_fails() -> None:
    """Issue 15, item 2: a top-(k+1) sampler must fail (validity mask, then TVD)."""
    ins = _inputs()
    res = _judge(_draw(ins["probs"], ins["top_k"] + 1, N))
    assert res.code == ReasonCode.INCORRECT_NUMERICAL and "outside the row's valid" in res.message


def test_a_greedy_sampler_stays_in_the_mask_but_fails_the_distribution() -> None:
    ins = _inputs()
    greedy = ins["probs"].argmax(dim=-1).expand(N, B).clone()
    res = _judge(greedy)
    assert res.code == ReasonCode.INCORRECT_NUMERICAL and "total variation" in res.message
    # with one call's samples only the mask is judged, and the details say so
    one = judge_sampling(_sampler(), "samples", greedy[0], greedy[0], inputs=ins, rules=SamplingRules())
    assert one.code is None and one.extra["distribution_checked"] is False


def test_top_k_ties_and_top_p_slack_follow_fib() -> None:
    probs = torch.tensor([[0.4, 0.2, 0.2, 0.2]])
    mask = valid_mask(probs, "top_k", {"top_k": torch.tensor([2])})
    assert mask.tolist() == [[True, True, True, True]]  # three tokens tie at the 2nd
    mask = valid_mask(probs, "top_p", {"top_p": torch.tensor([0.5])}, eps=0.05)
    assert mask.tolist() == [[True, False, False, False]]
    mask = valid_mask(probs, "top_p", {"top_p": torch.tensor([0.58])}, eps=0.05)
    assert mask.tolist() == [[True, True, False, False]]
    assert thresholding(_sampler("top_k_top_p_sampling_from_probs_v1")) == "top_k_top_p"
    assert thresholding(_sampler("sampling_from_probs_v1")) == "none"


def test_out_of_vocabulary_and_missing_inputs() -> None:
    ins = _inputs()
    bad = torch.tensor([0, 1, V])
    res = judge_sampling(_sampler(), "samples", bad, bad, inputs=ins, rules=SamplingRules())
    assert res.code == ReasonCode.INCORRECT_NUMERICAL and "vocabulary" in res.message
    with pytest.raises(InputError, match="probs"):
        judge_sampling(_sampler(), "samples", bad, bad, inputs={"top_k": ins["top_k"]},
                       rules=SamplingRules())


def test_too_few_samples_for_a_row_support_are_not_judged_by_tvd() -> None:
    """Noise guard: 150 samples over a 4- or 6-token support (under 50 per token) never reject an
    honest sampler on distance; the rows with enough samples are still judged."""
    ins = _inputs()
    res = _judge(_draw(ins["probs"], ins["top_k"], 151))
    assert res.code is None, res.message
    assert res.extra["rows_distribution_checked"] == 1  # only the top_k=1 row has 50/token
