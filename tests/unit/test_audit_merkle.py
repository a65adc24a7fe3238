"""RFC 6962 / RFC 9162 Merkle hashing and proofs: published vectors plus properties."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxharness.audit import merkle
from sandboxharness.errors import VerificationError

VECTORS = Path(__file__).resolve().parents[1] / "data" / "rfc6962"
FILES = sorted(VECTORS.rglob("*.json"))
# The RFC 6962 reference tree (the leaves transparency-dev/merkle and CT use).
REF_LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f")]
REF_ROOT_8 = "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"


def _b(s: str) -> bytes:
    return base64.b64decode(s)


def _run(v: dict) -> None:
    proof = [_b(p) for p in v["proof"] or []]
    if "leafIdx" in v:
        merkle.verify_inclusion(_b(v["leafHash"]), v["leafIdx"], v["treeSize"], proof,
                                _b(v["root"]))
    else:
        merkle.verify_consistency(v["size1"], v["size2"], proof, _b(v["root1"]), _b(v["root2"]))


def test_vectors_are_all_there() -> None:
    assert len(FILES) == 196
    assert sum(1 for f in FILES if not json.loads(f.read_text())["wantErr"]) >= 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(VECTORS)))
def test_rfc6962_vector(path: Path) -> None:
    """Every happy path verifies; every mutated proof, root, index or size is rejected."""
    v = json.loads(path.read_text())
    if v["wantErr"]:
        with pytest.raises(VerificationError):
            _run(v)
    else:
        _run(v)


def test_reference_root() -> None:
    leaves = [merkle.hash_leaf(x) for x in REF_LEAVES]
    assert merkle.root_hash(leaves).hex() == REF_ROOT_8
    assert merkle.root_hash([]) == merkle.EMPTY_ROOT


@pytest.mark.parametrize("path", [f for f in FILES if f.name == "happy-path.json"
                                  and "additional" not in f.parts], ids=str)
def test_generated_proofs_equal_the_vectors(path: Path) -> None:
    """Our generator produces byte-identical proofs for the reference tree."""
    v = json.loads(path.read_text())
    leaves = [merkle.hash_leaf(x) for x in REF_LEAVES]
    want = [_b(p) for p in v["proof"] or []]
    if "leafIdx" in v:
        got = merkle.inclusion_proof(leaves, v["leafIdx"], v["treeSize"])
        assert merkle.root_hash(leaves[:v["treeSize"]]) == _b(v["root"])
    else:
        got = merkle.consistency_proof(leaves, v["size1"], v["size2"])
    assert got == want


def _leaves(n: int) -> list[bytes]:
    return [merkle.hash_leaf(b"record %d" % i) for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_inclusion_roundtrip_and_mutations(case: tuple[int, int]) -> None:
    n, i = case
    leaves = _leaves(n)
    root = merkle.root_hash(leaves)
    proof = merkle.inclusion_proof(leaves, i)
    merkle.verify_inclusion(leaves[i], i, n, proof, root)
    bad_proofs = [proof + [root], proof[:-1] if proof else [root]]
    if proof:
        flipped = bytearray(proof[0])
        flipped[0] ^= 1
        bad_proofs.append([bytes(flipped), *proof[1:]])
    for bad in bad_proofs:
        with pytest.raises(VerificationError):
            merkle.verify_inclusion(leaves[i], i, n, bad, root)
    with pytest.raises(VerificationError):
        merkle.verify_inclusion(merkle.hash_leaf(b"forged"), i, n, proof, root)
    if n > 1:
        with pytest.raises(VerificationError):
            merkle.verify_inclusion(leaves[i], (i + 1) % n, n, proof, root)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n))))
def test_consistency_roundtrip_and_mutations(case: tuple[int, int]) -> None:
    m, n = case
    leaves = _leaves(n)
    old, new = merkle.root_hash(leaves[:m]), merkle.root_hash(leaves)
    proof = merkle.consistency_proof(leaves, m, n)
    merkle.verify_consistency(m, n, proof, old, new)
    if m == n:
        return
    forged_old = merkle.root_hash(_leaves(m - 1) + [merkle.hash_leaf(b"forged")])
    for args in [(m, n, proof, forged_old, new), (m, n, proof, old, merkle.EMPTY_ROOT),
                 (m, n, proof[:-1], old, new), (m, n, [*proof, old], old, new),
                 (m, n, [], old, new)]:
        with pytest.raises(VerificationError):
            merkle.verify_consistency(*args)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 200))
def test_compact_range_matches_recursive_root(n: int) -> None:
    leaves = _leaves(n)
    rng = merkle.CompactRange()
    for k, leaf in enumerate(leaves, start=1):
        rng.append(leaf)
        if k in (1, n // 2 or 1, n):
            assert rng.root() == merkle._mth(leaves, 0, k)
    assert merkle.root_hash(leaves) == (merkle._mth(leaves, 0, n) if n else merkle.EMPTY_ROOT)
