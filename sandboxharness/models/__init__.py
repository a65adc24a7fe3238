"""Frozen pydantic models: FlashInfer-Bench documents, policy and verdict."""

from ._base import FrozenModel, canonical_json, sha256_tag
from .definition import ConstAxis, Definition, TensorSpec, VarAxis
from .policy import Policy
from .solution import Binding, BuildSpec, Language, Solution, SourceFile
from .trace import Trace
from .verdict import Candidate, Environment, Reason, ReasonCode, Stage, StageResult, Subject, Verdict
from .workload import RandomInput, SafetensorsInput, ScalarInput, Workload, WorkloadTrace

__all__ = [
    "Binding", "BuildSpec", "Candidate", "ConstAxis", "Definition", "Environment",
    "FrozenModel", "Language", "Policy", "RandomInput", "Reason", "ReasonCode",
    "SafetensorsInput", "ScalarInput", "Solution", "SourceFile", "Stage", "StageResult",
    "Subject", "TensorSpec", "Trace", "VarAxis", "Verdict", "Workload", "WorkloadTrace",
    "canonical_json", "sha256_tag",
]
