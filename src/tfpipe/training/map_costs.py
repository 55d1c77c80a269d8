"""Which stage of a `Pipeline` costs the input's CPU time: timed with and without its maps.

the training input, timed alone (fit's input probe) ─▶ CPU seconds per example ─┐
the same Pipeline without its map()s ─measure()──────▶ CPU seconds per example ─┴─▶
    InputStages: the maps' share of the input's CPU time, and whether one is random
"""

from __future__ import annotations

from tfpipe.errors import SchemaError
from tfpipe.loaders.pipeline import Pipeline, without_maps
from tfpipe.training.breakdown import InputStages
from tfpipe.training.throughput import Throughput, measure

MAX_BATCHES = 50


def input_stages(
    pipeline: Pipeline | None, input_alone: Throughput, max_seconds: float
) -> InputStages | None:
    """The CPU time per example of the input (`input_alone`, `pipeline` timed alone) and of
    `pipeline` without its maps (timed here for at most `max_seconds`).

    None when `pipeline` is None or has no maps, or when they cannot be left out (a later
    `filter()` needs a feature a map makes) or timed apart (a `cache()`, the tf.data service).

    Examples:
        >>> pipeline = tfpipe.Pipeline("out/train").map(augment).batch(64)
        >>> input_stages(pipeline, tfpipe.benchmark(pipeline), 1.0).maps_share
        0.62
    """
    try:
        found = None if pipeline is None else without_maps(pipeline)
    except (SchemaError, KeyError, ValueError, TypeError):
        return None  # the rest of the pipeline needs what the maps make
    if found is None or not input_alone.examples:
        return None
    dataset, maps, random = found
    bare = measure(
        iter(dataset.repeat()), num_batches=MAX_BATCHES, warmup=2, max_seconds=max_seconds
    )
    return InputStages(
        maps,
        random,
        1000 * input_alone.cpu_s / input_alone.examples,
        1000 * bare.cpu_s / bare.examples,
    )
