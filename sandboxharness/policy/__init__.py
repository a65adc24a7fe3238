"""The policy's rules, in one place: each a small object built from the YAML policy
(``models.policy``) with one ``check``, each violation carrying its reason code.

* ``solution``: the language and the size of the sources (before anything is analysed).
* ``sources``: native artifacts, module shadowing, the entry file, encoding, unreadable
  Python (fails closed).
* ``imports``: deny and allow lists (an empty allow list allows nothing), the definition's
  baseline library.
* ``thresholds``: which analyser findings reject, with which code.
* ``gates``: required stages, the CPU speed gate, the GPU regime/repeat gate.
* ``decide``: the promotion stage.

Rules judge what the static layer and the stages found; they read no file and run nothing.
"""

from .decide import decide
from .gates import CpuSpeedGate, RegimeGate, RequiredStages, Run, blocks, median
from .imports import (
    AllowedImports,
    BaselineLibrary,
    DeniedImports,
    ImportRules,
    ModuleUse,
    matches_prefix,
)
from .solution import AllowedLanguages, SourceSize, solution_violations
from .sources import (
    NATIVE_SUFFIXES,
    PROTECTED_MODULES,
    ModuleShadowing,
    NativeArtifact,
    ScannableEntry,
    Unreadable,
    Utf8Source,
)
from .thresholds import FindingThreshold, Rated, static_code
from .violation import Violation

__all__ = [
    "NATIVE_SUFFIXES", "PROTECTED_MODULES", "AllowedImports", "AllowedLanguages",
    "BaselineLibrary", "CpuSpeedGate", "DeniedImports", "FindingThreshold", "ImportRules",
    "ModuleShadowing", "ModuleUse", "NativeArtifact", "Rated", "RegimeGate", "RequiredStages",
    "Run", "ScannableEntry", "SourceSize", "Unreadable", "Utf8Source", "Violation", "blocks",
    "decide", "matches_prefix", "median", "solution_violations", "static_code",
]
