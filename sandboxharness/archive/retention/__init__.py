"""Retention: what ``archive gc`` may delete, and what it never touches."""

from .gc import GcResult, collect_garbage

__all__ = ["GcResult", "collect_garbage"]
