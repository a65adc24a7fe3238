"""Launch helpers: pure functions of sizes, no state."""

import triton

_BLOCKS = (128, 256, 512, 1024)


def pick_block(n: int) -> int:
    for block in _BLOCKS:
        if n <= block:
            return block
    return _BLOCKS[-1]


def grid_1d(n: int, block: int) -> tuple[int]:
    return (triton.cdiv(n, block),)
