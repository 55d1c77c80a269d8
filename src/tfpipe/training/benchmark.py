"""`tfpipe.benchmark`: how fast any input delivers batches on its own, without a model."""

from __future__ import annotations

from typing import Any

from tfpipe.checks import check_int
from tfpipe.loaders.supervised import Names
from tfpipe.training.adapters import adapt
from tfpipe.training.faults import naming
from tfpipe.training.throughput import Throughput, measure


def benchmark(
    data: Any,
    batches: int = 50,
    *,
    batch_size: int | None = None,
    image_size: tuple[int, int] | None = None,
    warmup: int = 5,
    max_seconds: float | None = None,
    x: Names | None = None,
    y: Names | None = None,
) -> Throughput:
    """Measures how fast an input delivers batches on its own, without a model.

    A finite input is iterated epoch after epoch until `warmup + batches` batches were seen.
    A `PyDataset` is read with a plain loop over its indices (its `workers` are not used).

    Examples:
        >>> result = tfpipe.benchmark(tf.data.Dataset.range(64).batch(8), batches=20)
        >>> result.batches
        20

    Args:
        data: a `tfpipe.Pipeline`, a `tf.data.Dataset`, a `keras.utils.PyDataset`, or the path
            of tfpipe TFRecords (read by a default Pipeline).
        batches: how many batches to time. Defaults to 50.
        batch_size: the batch size used for a path. Defaults to 32.
        image_size: `(height, width)` for a path whose schema has variable image sizes.
            Defaults to None.
        warmup: batches read before the timing starts. Defaults to 5.
        max_seconds: stop timing after this long. Defaults to None (no limit).
        x: the input feature name(s) to select from a path or a source (as in `tfpipe.fit`).
            Defaults to None (its one Image, or every feature when it has not one Image and
            one ClassLabel).
        y: the target feature name(s), as `x`. Defaults to None.

    Returns:
        A `Throughput`: examples/s, batches/s and the time to the first batch.

    Raises:
        DecodeError: a Pipeline or path reads a damaged record or image (named, with
            TensorFlow's error as the cause; see `named_errors`).
    """
    check_int("batches", batches)
    source = adapt(
        data=data,
        batch_size=batch_size,
        shuffle=False,
        image_size=image_size,
        x=x,
        y=y,
        pairs=False,
    )
    with naming(source):
        return measure(
            source.batches(repeat=True), num_batches=batches, warmup=warmup, max_seconds=max_seconds
        )
