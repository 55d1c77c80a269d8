"""Throughput measurement shared by `tfpipe.fit`, `tfpipe.benchmark`, the CLI and `benchmarks/`.

It depends on nothing but numpy-like batches (and the argument checks), so every layer can use
it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from tfpipe.checks import check_int, check_positive


@dataclasses.dataclass(frozen=True)
class Throughput:
    """How fast an input delivered batches.

    Attributes:
        examples_per_s: examples per second over the timed batches.
        batches_per_s: batches per second over the timed batches.
        first_batch_s: seconds until the first batch arrived (start-up cost).
        batches: how many batches were timed.
        examples: how many examples those batches held.
        cpu_s: CPU seconds this process spent (all its threads) while they were timed.
    """

    examples_per_s: float
    batches_per_s: float
    first_batch_s: float
    batches: int
    examples: int
    cpu_s: float = 0.0


def batch_size_of(batch: Any) -> int:
    """The leading dimension of the first array found in a (nested) batch."""
    while isinstance(batch, tuple | list | dict):
        if not batch:
            return 0
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    shape = getattr(batch, "shape", None)
    if shape is None or len(shape) == 0:
        return 1
    return int(shape[0])


def measure(
    batches: Iterable[Any],
    *,
    num_batches: int = 50,
    warmup: int = 5,
    max_seconds: float | None = None,
) -> Throughput:
    """Iterates `warmup` batches, then times `num_batches` more (fewer if the input ends).

    Examples:
        >>> measure(iter([np.zeros((8, 4))] * 20), num_batches=10, warmup=2).examples
        80

    Args:
        batches: any iterable of batches (arrays, tensors, or tuples/dicts of them).
        num_batches: how many batches to time. Defaults to 50.
        warmup: batches iterated before the timing starts. Defaults to 5.
        max_seconds: stop timing after this long (at least one batch is timed).
            Defaults to None (no limit).
    """
    check_int("num_batches", num_batches)
    check_int("warmup", warmup, minimum=0)
    check_positive("max_seconds", max_seconds, or_none=True)
    deadline = float("inf") if max_seconds is None else max_seconds
    iterator = iter(batches)
    start = time.perf_counter()
    first_batch_s = 0.0
    for i in range(warmup):
        if next(iterator, None) is None:
            break
        if i == 0:
            first_batch_s = time.perf_counter() - start
    examples = count = 0
    cpu, start = time.process_time(), time.perf_counter()
    for batch in iterator:
        if count == 0 and warmup == 0:
            first_batch_s = time.perf_counter() - start
        examples += batch_size_of(batch)
        count += 1
        if count >= num_batches or time.perf_counter() - start >= deadline:
            break
    elapsed = max(time.perf_counter() - start, 1e-9)
    cpu = time.process_time() - cpu
    if count == 0:
        raise ValueError(f"the input ended during the {warmup} warm-up batches; nothing was timed")
    return Throughput(
        examples_per_s=examples / elapsed,
        batches_per_s=count / elapsed,
        first_batch_s=first_batch_s,
        batches=count,
        examples=examples,
        cpu_s=cpu,
    )
