"""Skills: versioned, content-hashed guidance documents for kernel-writing agents.

A skill is ``skills/<name>/SKILL.md``: YAML front matter (name, description, version, and
optionally the op_types and definition globs it applies to) and a markdown body split into
``##`` sections. The task bundle carries the sections relevant to a round, each with its
skill's version and sha256, so a reviewer can tell exactly what an agent was told.
"""

from .loader import (
    MAX_SKILL_BYTES,
    MAX_SKILLS,
    SKILLS_DIR_ENV,
    Skill,
    SkillError,
    SkillExcerpt,
    SkillSet,
    load_skills,
    parse_skill,
    skills_dir,
)

__all__ = ["MAX_SKILLS", "MAX_SKILL_BYTES", "SKILLS_DIR_ENV", "Skill", "SkillError",
           "SkillExcerpt", "SkillSet", "load_skills", "parse_skill", "skills_dir"]
