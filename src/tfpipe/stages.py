"""Which stage of a `Pipeline` costs its CPU time: the input timed with and without its maps.

Pipeline ──build()──────────────▶ CPU seconds per example ─┐
Pipeline without map()s ─build()─▶ CPU seconds per example ─┴─▶ InputStages (maps' share)
"""

from __future__ import annotations

import time

import tensorflow as tf

from tfpipe.bench import batch_size_of
from tfpipe.breakdown import InputStages
from tfpipe.errors import SchemaError
from tfpipe.loaders.pipeline import Pipeline

WARMUP_BATCHES = 2
MAX_BATCHES = 50


def input_stages(pipeline: Pipeline | None, max_seconds: float) -> InputStages | None:
    """The CPU time per example of `pipeline` with and without its maps, each timed for at
    most `max_seconds`; None when it has no maps, or when they cannot be left out (a later
    `filter()` or `as_supervised` needs a feature a map makes) or timed apart (a `cache()`,
    the tf.data service).

    Example:
        >>> input_stages(tfpipe.Pipeline("out/train").map(augment).batch(64), 1.0).maps_share
        0.62
    """
    found = None if pipeline is None else pipeline._without_maps()
    if found is None:
        return None
    without, maps, random = found
    try:
        bare = without.build()
    except (SchemaError, KeyError, ValueError, TypeError):
        return None  # the rest of the pipeline needs what the maps make
    with_maps = _cpu_ms_per_example(pipeline.build(), max_seconds)  # type: ignore[union-attr]
    without_maps = _cpu_ms_per_example(bare, max_seconds)
    if with_maps is None or without_maps is None:
        return None
    return InputStages(maps, random, with_maps, without_maps)


def _cpu_ms_per_example(dataset: tf.data.Dataset, max_seconds: float) -> float | None:
    """CPU milliseconds of this process per example delivered, after a short warm-up; None
    for an empty dataset."""
    iterator = iter(dataset.repeat())
    for _ in range(WARMUP_BATCHES):
        if next(iterator, None) is None:
            return None
    cpu, start = time.process_time(), time.perf_counter()
    examples = batches = 0
    while batches < MAX_BATCHES and (batches == 0 or time.perf_counter() - start < max_seconds):
        examples += batch_size_of(next(iterator))
        batches += 1
    return 1000 * (time.process_time() - cpu) / max(examples, 1)
