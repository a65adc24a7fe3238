"""Candidate generators for the campaign loop (see :mod:`.interface`)."""

from .interface import MAX_K, Generator, GeneratorError

__all__ = ["MAX_K", "Generator", "GeneratorError"]
