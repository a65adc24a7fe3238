"""Write the corpus's safetensors blobs into a Hugging Face cache-style dataset folder.

    python kernels/fib_families/make_blobs.py OUT_DIR     # prints the snapshot folder

Layout, as ``huggingface_hub`` leaves a downloaded dataset::

    OUT_DIR/hub/datasets--fib--families/blobs/<sha256>               (mode 0600, as safetensors
    OUT_DIR/hub/datasets--fib--families/snapshots/rev0/blob/...       writes it; relative links
                                                                      into ../../../../blobs)

The snapshot folder is the dataset root: pass it as ``blob_root``. Values are deterministic
(fixed seeds); each blob holds the index or routing inputs that must satisfy the definition's
constraints (offsets from 0 to the extent, unique in-range indices, -1 padding, normalised
probabilities, l2-normalised keys for the multi-token delta rule, deep_gemm's fp8 packing).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

Blob = dict[str, torch.Tensor]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _unit(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """bf16 vectors of unit l2 norm along the last dim (FIB's GDN workloads normalise q, k)."""
    x = torch.randn(shape, generator=_gen(seed))
    return (x / x.norm(dim=-1, keepdim=True)).to(torch.bfloat16)


def moe(seq_len: int, seed: int) -> Blob:
    g = _gen(seed)
    return {"routing_logits": torch.randn(seq_len, 16, generator=g),
            "routing_bias": (0.1 * torch.randn(16, generator=g)).to(torch.bfloat16)}


def gdn_prefill(seq_lens: list[int], seed: int) -> Blob:
    total = sum(seq_lens)
    cu = torch.tensor([0, *seq_lens]).cumsum(0).to(torch.int64)
    return {"cu_seqlens": cu, "q": _unit((total, 4, 128), seed), "k": _unit((total, 4, 128), seed + 1)}


def gdn_mtp(batch: int, seq_len: int, pool: int, seed: int) -> Blob:
    idx = torch.randperm(pool, generator=_gen(seed))[:batch].to(torch.int32)
    return {"initial_state_indices": idx, "q": _unit((batch, seq_len, 4, 128), seed + 1),
            "k": _unit((batch, seq_len, 4, 128), seed + 2)}


def dsa_sparse(valid: list[int], num_pages: int, seed: int) -> Blob:
    g = _gen(seed)
    rows = torch.full((len(valid), 2048), -1, dtype=torch.int32)
    for r, n in enumerate(valid):
        rows[r, :n] = torch.randperm(num_pages, generator=g)[:n].to(torch.int32)
    return {"sparse_indices": rows}


def _pack_fp8_k_cache(k: torch.Tensor) -> torch.Tensor:
    """deep_gemm's layout: per page all fp8 values, then one float32 scale per token."""
    pages, ps, dim = k.shape
    scale = (k.abs().amax(dim=-1, keepdim=True) / 448.0).clamp_min(1e-6)
    fp8 = (k / scale).to(torch.float8_e4m3fn).view(torch.uint8).reshape(pages, ps * dim)
    sc = scale.to(torch.float32).contiguous().view(torch.uint8).reshape(pages, ps * 4)
    return torch.cat([fp8, sc], dim=1).view(torch.int8).reshape(pages, ps, 1, dim + 4)


def dsa_indexer(seq_lens: list[int], max_pages: int, num_pages: int, seed: int) -> Blob:
    g = _gen(seed)
    k = torch.randn(num_pages, 64, 128, generator=g)
    table = torch.stack([torch.randperm(num_pages, generator=g)[:max_pages] for _ in seq_lens])
    return {"k_index_cache_fp8": _pack_fp8_k_cache(k),
            "seq_lens": torch.tensor(seq_lens, dtype=torch.int32),
            "block_table": table.to(torch.int32)}


def rope(num_tokens: int, max_seq_len: int, seed: int) -> Blob:
    return {"positions": torch.randint(0, max_seq_len, (num_tokens,), generator=_gen(seed))}


def sampling(top_k: list[int], vocab: int, seed: int) -> Blob:
    logits = 3.0 * torch.randn(len(top_k), vocab, generator=_gen(seed))
    return {"probs": torch.softmax(logits, dim=-1),
            "top_k": torch.tensor(top_k, dtype=torch.int32)}


def gqa(seq_lens: list[int], num_pages: int, seed: int) -> Blob:
    indptr = torch.tensor([0, *seq_lens]).cumsum(0).to(torch.int32)
    pages = torch.randperm(num_pages, generator=_gen(seed))[:sum(seq_lens)].to(torch.int32)
    return {"kv_indptr": indptr, "kv_indices": pages}


# blob path (relative to the dataset root, as the workloads name it) -> how it is made
BLOBS: dict[str, Callable[[], Blob]] = {
    "blob/moe/moe_t3.safetensors": lambda: moe(3, 11),
    "blob/moe/moe_t8.safetensors": lambda: moe(8, 12),
    "blob/gdn/prefill_2x.safetensors": lambda: gdn_prefill([2, 3], 21),
    "blob/gdn/mtp_b2.safetensors": lambda: gdn_mtp(2, 2, 3, 31),
    "blob/dsa/sparse_t2.safetensors": lambda: dsa_sparse([30, 50], 50, 41),
    "blob/dsa/indexer_b2.safetensors": lambda: dsa_indexer([2100, 1500], 34, 40, 51),
    "blob/rope/positions_t4.safetensors": lambda: rope(4, 16, 61),
    "blob/sampling/probs_b2.safetensors": lambda: sampling([5, 40], 128256, 71),
    "blob/gqa/decode_b2.safetensors": lambda: gqa([7, 8], 20, 81),
}


def write_dataset(out: Path) -> Path:
    """Write every blob (0600) behind a relative link; return the snapshot (dataset root)."""
    repo = out / "hub" / "datasets--fib--families"
    snapshot = repo / "snapshots" / "rev0"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for rel, make in BLOBS.items():
        tmp = repo / "blobs" / "incoming.tmp"
        save_file(make(), str(tmp))
        os.chmod(tmp, 0o600)  # what safetensors' save_file leaves; kept explicit here
        sha = hashlib.sha256(tmp.read_bytes()).hexdigest()
        tmp.replace(repo / "blobs" / sha)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        depth = len(Path(rel).parts) - 1 + 2  # up to the snapshot, then snapshots/ and rev0/
        link.symlink_to(Path(*[".."] * depth, "blobs", sha))
    return snapshot


if __name__ == "__main__":
    print(write_dataset(Path(sys.argv[1])))
