"""The repository's data tools (tools/): the GPU corpus is up to date, and the corpus
self-check judges outputs with the harness's comparison under the loaded policy."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
import torch

from sandboxharness.api import default_policy
from sandboxharness.intake import load_definition, load_policy
from sandboxharness.stages.compare_modes import resolve
from tests.conftest import REPO


def test_generated_gpu_corpus_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    from tools import build_gpu_corpus

    assert build_gpu_corpus.main(["--check"]) == 0, capsys.readouterr().out


def test_corpus_annotation_becomes_description_and_is_stripped() -> None:
    from tools.build_corpus import parse_annotation, split_docstring

    doc, code = split_docstring('"""Title line.\n\nBody.\n\nSource: somewhere"""\n\nx = 1\n', "t")
    ann = parse_annotation(doc)
    assert (ann.title, ann.body, ann.sources, code) == ("Title line.", "Body.", ["somewhere"],
                                                         "x = 1\n")


@pytest.fixture
def selfcheck(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # importing it sets TRITON_INTERPRET on a machine without CUDA: keep that out of the
    # test process (worker subprocesses of later tests inherit the environment)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return importlib.import_module("tools.selfcheck")


def test_selfcheck_uses_the_policy_tolerance(selfcheck: ModuleType) -> None:
    definition = load_definition(REPO / "kernels" / "definitions" / "softmax_v512.json")
    ref = torch.randn(2, 512, generator=torch.Generator().manual_seed(0))
    off = ref * (1 + 1e-4)  # inside FIB's 1e-2, outside the default policy's fp32 1e-5
    strict = resolve(definition, default_policy().correctness)
    loose = resolve(definition, load_policy(REPO / "policies" / "fib.yaml").correctness)
    selfcheck.compare_outputs(definition, loose, [off], [ref])
    selfcheck.compare_outputs(definition, strict, [ref.clone()], [ref])
    with pytest.raises(selfcheck.CaseFailed) as failed:
        selfcheck.compare_outputs(definition, strict, [off], [ref])
    assert failed.value.code == "INCORRECT_NUMERICAL"


def test_selfcheck_reason_codes_for_kind(selfcheck: ModuleType) -> None:
    definition = load_definition(REPO / "kernels" / "definitions" / "softmax_v512.json")
    rules = resolve(definition, default_policy().correctness)
    ref = torch.zeros(2, 512)
    for got, code in (([ref.double()], "INCORRECT_DTYPE"), ([ref[:1]], "INCORRECT_SHAPE"),
                      ([ref.tolist()], "INCORRECT_TYPE"), ([], "INCORRECT_TYPE"),
                      ([ref + float("nan")], "NONFINITE_OUTPUT")):
        with pytest.raises(selfcheck.CaseFailed) as failed:
            selfcheck.compare_outputs(definition, rules, got, [ref])
        assert failed.value.code == code
