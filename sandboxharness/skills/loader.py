"""Loading ``SKILL.md`` documents and choosing the excerpts relevant to one task.

Skill files are data the operator controls, but they are still read with caps (size, count,
front-matter shape) and every failure is one :class:`SkillError` line naming the file.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, StringConstraints, ValidationError

from ..errors import InputError
from ..models._base import FrozenModel, Label, Name, canonical_json, sha256_tag

__all__ = ["MAX_SKILLS", "MAX_SKILL_BYTES", "SKILLS_DIR_ENV", "Skill", "SkillError",
           "SkillExcerpt", "SkillSet", "load_skills", "parse_skill", "skills_dir"]

MAX_SKILL_BYTES = 128 * 1024
"""Largest SKILL.md read (the starter set's largest is a few KiB)."""
MAX_SKILLS = 256
"""Most skill folders under one root."""
MAX_EXCERPT_CHARS = 48 * 1024
"""Default bound on the text of all excerpts chosen for one task (an agent's context)."""
SKILLS_DIR_ENV = "SANDBOXHARNESS_SKILLS_DIR"
DIRECTION_PREFIX = "direction:"
"""A section whose heading starts with this is included only for a matching direction."""

_SEMVER = r"^[0-9]+\.[0-9]+\.[0-9]+$"
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_TOKEN = re.compile(r"[a-z0-9_]+")

_PKG = Path(__file__).resolve().parents[1]


class SkillError(InputError):
    """A skill document that cannot be read or does not follow the SKILL.md convention."""


class FrontMatter(FrozenModel):
    name: Name
    """The skill's name; must equal its folder's name."""
    description: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    version: Annotated[str, StringConstraints(pattern=_SEMVER)]
    """``MAJOR.MINOR.PATCH``: bump it with every change (the sha256 changes anyway)."""
    op_types: list[Label] = Field(default_factory=list, max_length=64)
    """op_types this skill applies to; with ``definitions`` both empty it applies to all."""
    definitions: list[Label] = Field(default_factory=list, max_length=64)
    """``fnmatch`` globs over definition names this skill applies to."""


class Section(FrozenModel):
    heading: str
    text: str


class Skill(FrozenModel):
    name: Name
    description: str
    version: str
    sha256: str
    """``sha256:<hex>`` of the SKILL.md bytes as read."""
    body: str
    path: str
    """Where it was read from (informational: the hash identifies it)."""
    op_types: list[str] = Field(default_factory=list)
    definitions: list[str] = Field(default_factory=list)
    sections: list[Section] = Field(default_factory=list)

    @property
    def general(self) -> bool:
        return not self.op_types and not self.definitions

    def applies_to(self, op_type: str, definition: str) -> bool:
        return (self.general or op_type in self.op_types
                or any(fnmatch.fnmatchcase(definition, g) for g in self.definitions))


class SkillExcerpt(FrozenModel):
    """One section of one skill, as handed to an agent."""

    skill: str
    version: str
    sha256: str
    heading: str
    text: str


def _split_sections(title: str, body: str) -> list[Section]:
    sections: list[Section] = []
    heading, lines = title, list[str]()
    fence = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        if not fence and line.startswith("## "):
            if any(x.strip() for x in lines):
                sections.append(Section(heading=heading, text="\n".join(lines).strip()))
            heading, lines = line[3:].strip(), list[str]()
        elif not fence and line.startswith("# ") and not sections and not lines:
            heading = line[2:].strip()
        else:
            lines.append(line)
    if any(x.strip() for x in lines):
        sections.append(Section(heading=heading, text="\n".join(lines).strip()))
    return sections


def parse_skill(data: bytes, where: str) -> Skill:
    """One SKILL.md from its bytes; ``where`` names it in errors."""
    if len(data) > MAX_SKILL_BYTES:
        raise SkillError(f"{len(data)} bytes, over the {MAX_SKILL_BYTES}-byte cap", where=where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SkillError(f"not UTF-8 ({e.reason} at byte {e.start})", where=where) from None
    text = text.replace("\r\n", "\n")
    m = _FRONT.match(text)
    if m is None:
        raise SkillError("no front matter (the file must start with '---' lines)", where=where)
    try:
        raw: Any = yaml.safe_load(m.group(1))
    except yaml.YAMLError as e:
        raise SkillError(f"front matter is not YAML: {e}", where=where) from None
    if not isinstance(raw, dict):
        raise SkillError("front matter must be a mapping", where=where)
    try:
        front = FrontMatter.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "front matter"
        raise SkillError(f"{loc}: {err['msg']}", where=where) from None
    body = text[m.end():]
    if not body.strip():
        raise SkillError("empty body", where=where)
    return Skill(name=front.name, description=front.description, version=front.version,
                 sha256=sha256_tag(data), body=body, path=where, op_types=front.op_types,
                 definitions=front.definitions, sections=_split_sections(front.name, body))


def _tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.lower()) if len(t) >= 3}


class SkillSet(FrozenModel):
    """Every skill under one root, ordered by name."""

    skills: list[Skill] = Field(default_factory=list)

    def __iter__(self) -> Iterator[Skill]:  # type: ignore[override]
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    @property
    def sha256(self) -> str:
        """One hash over (name, version, sha256) of every skill: the set's identity."""
        return sha256_tag(canonical_json([[s.name, s.version, s.sha256] for s in self.skills]))

    def relevant(self, op_type: str, definition: str, direction: str | None = None, *,
                 max_chars: int = MAX_EXCERPT_CHARS) -> list[SkillExcerpt]:
        """The sections an agent working on ``definition`` should read.

        Skills naming the op_type or definition come first, then general ones. A section
        headed ``Direction: ...`` is included only when ``direction`` (an id, a bottleneck
        class or a limiter) shares a word with that heading; every other section of an
        applicable skill is included. Stops before ``max_chars`` of text in all."""
        wanted = _tokens(direction) if direction else set()
        chosen = [s for s in self.skills if s.applies_to(op_type, definition)]
        chosen.sort(key=lambda s: (s.general, s.name))
        out: list[SkillExcerpt] = []
        used = 0
        for skill in chosen:
            for sec in skill.sections:
                if sec.heading.lower().startswith(DIRECTION_PREFIX):
                    if not wanted & _tokens(sec.heading[len(DIRECTION_PREFIX):]):
                        continue
                if used + len(sec.text) > max_chars:
                    continue
                used += len(sec.text)
                out.append(SkillExcerpt(skill=skill.name, version=skill.version,
                                        sha256=skill.sha256, heading=sec.heading,
                                        text=sec.text))
        return out


def skills_dir() -> Path:
    """``$SANDBOXHARNESS_SKILLS_DIR``, else the checkout's ``skills/``, else the installed
    package data (``sandboxharness/_shipped/skills``)."""
    override = os.environ.get(SKILLS_DIR_ENV)
    if override:
        return Path(override)
    root = _PKG.parent
    if (root / "pyproject.toml").is_file() and (root / "skills").is_dir():
        return root / "skills"
    return _PKG / "_shipped" / "skills"


def load_skills(root: Path | None = None) -> SkillSet:
    """Every ``<root>/<name>/SKILL.md``; a folder without one is ignored (it may hold
    references), a SKILL.md whose ``name`` differs from its folder is an error."""
    root = skills_dir() if root is None else root
    if not root.is_dir():
        raise SkillError("not a directory", where=str(root))
    files = sorted(p for p in root.glob("*/SKILL.md") if p.is_file())
    if len(files) > MAX_SKILLS:
        raise SkillError(f"{len(files)} skills, over the cap of {MAX_SKILLS}", where=str(root))
    skills = []
    for path in files:
        if path.is_symlink():
            raise SkillError("a symbolic link (skills must be plain files)", where=str(path))
        with path.open("rb") as fh:
            data = fh.read(MAX_SKILL_BYTES + 1)
        skill = parse_skill(data, str(path))
        if skill.name != path.parent.name:
            raise SkillError(f"name {skill.name!r} differs from its folder "
                             f"{path.parent.name!r}", where=str(path))
        skills.append(skill)
    return SkillSet(skills=skills)
