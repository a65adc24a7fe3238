"""The content-addressed archive: every artifact an evaluation consumed or produced, by hash.

Layout (plain keys, so it works as-is on an object store)::

    ROOT/sha256/ab/cdef...          the objects: write-once, read-only, named by SHA-256
    ROOT/refs/verdicts/<hex>.json   an index of the archived verdicts (not evidence)
    ROOT/tmp/                       private temporary files of writes in progress

A verdict is archived as its canonical JSON, so its object's name is the ``verdict_sha256``
its audit record carries, and ``Verdict.artifacts`` names everything else by hash: the signed
log vouches for every byte (``archive verify``). Written on the trusted side only; nothing in
it is ever executed.
"""

from .collect import input_artifacts, publish, published
from .refs import load_verdict, put_verdict, resolve_verdict, verdict_bytes
from .store import Archive, ArchiveError, ArchiveIntegrityError, ArchiveLimits, digest_of

__all__ = ["Archive", "ArchiveError", "ArchiveIntegrityError", "ArchiveLimits", "digest_of",
           "input_artifacts", "load_verdict", "publish", "published", "put_verdict",
           "resolve_verdict", "verdict_bytes"]
