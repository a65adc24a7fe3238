"""Shared model base and canonical content hashing."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785
from pydantic import BaseModel, ConfigDict


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


def canonical_json(obj: Any) -> bytes:
    """RFC 8785 (JCS) canonical bytes; never ``json.dumps`` for anything hashed or signed."""
    return rfc8785.dumps(obj)


def sha256_tag(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
