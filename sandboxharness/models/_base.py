"""Shared model base, the caps every untrusted document is held to, and canonical hashing.

Caps are explicit and generous (several times the largest FlashInfer-Bench document), so a
document never reaches code that would choke on it: a string, list or mapping over its cap is
a one-line validation error naming the field, before anything uses it.
"""

from __future__ import annotations

import hashlib
import keyword
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from . import canonical

MAX_NAME = 256
"""Names, uuids, tags, authors, hardware labels (FlashInfer-Bench's longest: ~70)."""
MAX_IDENTIFIER = 128
"""Axis, input and output names: Python identifiers (they become the kernel's arguments)."""
MAX_TEXT = 64 * 1024
"""Free-form descriptions."""
MAX_ITEMS = 256
"""Entries of any list or mapping in a definition, solution or workload (tags, inputs...)."""


def _printable(v: str) -> str:
    if not v.isprintable():
        raise ValueError("must not contain control characters")
    return v


def _file_name(v: str) -> str:
    if "/" in v or "\\" in v or v in (".", "..") or v.startswith("."):
        raise ValueError("must not contain '/' or '\\' nor start with '.' (it names files)")
    return v


def _identifier(v: str) -> str:
    if not v.isidentifier() or keyword.iskeyword(v):
        raise ValueError("must be a Python identifier")
    return v


Label = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME),
                  AfterValidator(_printable)]
"""A short printable string (uuid, author, tag)."""
Name = Annotated[Label, AfterValidator(_file_name)]
"""A document name: also a file or directory name in the FlashInfer-Bench layout."""
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_IDENTIFIER),
                       AfterValidator(_identifier)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]


class FrozenModel(BaseModel):
    """Immutable, strict model: unknown fields are errors, attributes are documented."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
        ser_json_inf_nan="strings",
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The document as it would be written: fields never given are left out."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of the full, normalised document (defaults filled in)."""
        return canonical_json(self.model_dump(mode="json", by_alias=True))

    def content_hash(self) -> str:
        """``sha256:<hex>`` over :meth:`canonical_bytes`."""
        return sha256_tag(self.canonical_bytes())


class FiniteModel(FrozenModel):
    """A frozen model whose floats must be finite (NaN and infinities are validation errors)."""

    model_config = ConfigDict(allow_inf_nan=False)


def canonical_json(obj: Any) -> bytes:
    """RFC 8785 (JCS) canonical bytes; never ``json.dumps`` for anything hashed or signed."""
    return canonical.dumps(obj)  # fast, and rfc8785 itself wherever the two could differ


def sha256_tag(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
