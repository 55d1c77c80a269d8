"""How a write is planned: the order its examples are written in, and the shards cut from
that order (how many, and where each starts). Every writer plans the same way
(`write_tfrecords`, `tfpipe.beam`, `tfpipe.spark`), so their shards are the same."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tfpipe.format.metadata import SkippedExample

TARGET_SHARD_BYTES = 128 * 2**20
MIN_SHARDS = 8


def count_shards(num_examples: int, num_bytes: float) -> int:
    """Enough shards for ~TARGET_SHARD_BYTES each, and at least min(MIN_SHARDS, N)."""
    return max(math.ceil(num_bytes / TARGET_SHARD_BYTES), min(MIN_SHARDS, num_examples))


def shards_for(total: int, head: Sequence[bytes | SkippedExample]) -> int:
    """The shards `count_shards` plans for `total` examples as large as the records of `head`
    (the first chunk written) on average."""
    sample = [len(r) for r in head if isinstance(r, bytes)]
    return count_shards(total, sum(sample) / max(len(sample), 1) * total)


def written_order(total: int, shuffle: bool, seed: int) -> np.ndarray:
    """The indices of a source of `total` examples in the order `write_tfrecords` writes them:
    one global permutation drawn with `seed` (8 bytes per example), or 0..total-1.

    Examples:
        >>> written_order(5, shuffle=False, seed=0).tolist()
        [0, 1, 2, 3, 4]
    """
    if shuffle:
        return np.random.default_rng(seed).permutation(total)
    return np.arange(total)


def shard_bounds(total: int, num_shards: int) -> list[int]:
    """Where each of `num_shards` shards of `total` positions of the order starts, and the end:
    shard k holds positions [bounds[k], bounds[k + 1]), as even as can be."""
    return [round(k * total / num_shards) for k in range(num_shards + 1)]
