"""Skills: the SKILL.md loader (front matter, caps, hashing) and excerpt selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.skills import SkillError, load_skills, parse_skill
from tests.conftest import REPO

OK = b"""---
name: demo
description: a demo skill
version: 1.2.3
op_types: [rmsnorm]
---
# Demo

## Operator constraints
accumulate in fp32

```python
## not a heading inside a fence
```

## Direction: memory dram
load once

## Direction: compute
use tl.dot
"""


def _write(root: Path, name: str, data: bytes) -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "SKILL.md").write_bytes(data)
    return root / name / "SKILL.md"


def test_starter_set_loads_and_covers_the_families() -> None:
    skills = load_skills(REPO / "skills")
    names = {s.name for s in skills}
    assert {"harness-rules", "triton-tuning", "rmsnorm", "gemm", "softmax",
            "silu-and-mul"} <= names
    for s in skills:
        assert s.sha256.startswith("sha256:") and s.version.count(".") == 2
    # every operator family of kernels/definitions gets an operator-specific excerpt
    for op_type, definition in [("rmsnorm", "rmsnorm_h4096"), ("gemm", "gemm_n64_k128"),
                                ("softmax", "softmax_v512"),
                                ("activation", "silu_and_mul_d256"), ("axpy", "axpy_f32")]:
        got = skills.relevant(op_type, definition, None)
        assert got[0].skill not in ("harness-rules", "triton-tuning"), op_type
        assert any(e.skill == "harness-rules" and e.heading == "Promotion rules" for e in got)


def test_sections_and_direction_selection(tmp_path: Path) -> None:
    _write(tmp_path, "demo", OK)
    skills = load_skills(tmp_path)
    heads = [e.heading for e in skills.relevant("rmsnorm", "x", None)]
    assert heads == ["Operator constraints"]  # direction sections need a direction
    heads = [e.heading for e in skills.relevant("rmsnorm", "x", "memory")]
    assert heads == ["Operator constraints", "Direction: memory dram"]
    assert "## not a heading" in skills.relevant("rmsnorm", "x", None)[0].text
    assert skills.relevant("gemm", "gemm_n64_k128", "compute") == []  # not its op_type


def test_hash_changes_with_any_byte(tmp_path: Path) -> None:
    a = parse_skill(OK, "a")
    b = parse_skill(OK.replace(b"load once", b"load twice"), "b")
    assert a.sha256 != b.sha256 and a.version == b.version
    _write(tmp_path, "demo", OK)
    before = load_skills(tmp_path).sha256
    _write(tmp_path, "demo", OK + b"\nmore\n")
    assert load_skills(tmp_path).sha256 != before


@pytest.mark.parametrize(("data", "message"), [
    (b"# no front matter\n", "no front matter"),
    (b"---\nname: demo\n---\nbody\n", "description"),
    (b"---\nname: demo\ndescription: d\nversion: one\n---\nbody\n", "version"),
    (b"---\nname: demo\ndescription: d\nversion: 1.0.0\nextra: 1\n---\nbody\n", "extra"),
    (b"---\n[unclosed\n---\nbody\n", "not YAML"),
    (b"---\nname: demo\ndescription: d\nversion: 1.0.0\n---\n \n", "empty body"),
    (b"\xff\xfe", "not UTF-8"),
    (b"---\n" + b"x" * (200 * 1024) + b"\n---\n", "cap"),
])
def test_bad_skill_is_one_line_naming_the_file(data: bytes, message: str) -> None:
    with pytest.raises(SkillError, match=message) as info:
        parse_skill(data, "skills/demo/SKILL.md")
    assert str(info.value).startswith("skills/demo/SKILL.md: ") and "\n" not in str(info.value)


def test_name_must_match_folder(tmp_path: Path) -> None:
    _write(tmp_path, "other", OK)
    with pytest.raises(SkillError, match="differs from its folder"):
        load_skills(tmp_path)


def test_excerpt_budget(tmp_path: Path) -> None:
    _write(tmp_path, "demo", OK)
    got = load_skills(tmp_path).relevant("rmsnorm", "x", "memory", max_chars=12)
    assert [e.heading for e in got] == ["Direction: memory dram"]  # the first would not fit
