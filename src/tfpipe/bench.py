"""Throughput measurement shared by `tfpipe.fit`, the CLI and `benchmarks/`.

`adapt()` is the one dispatcher that turns every input tfpipe trains on into what Keras consumes:

    tfpipe.Pipeline ─────build()────────────┐
    tf.data.Dataset ─────────────────────────┼─▶ Input(data=prefetched Dataset, steps, ...)
    "out/train" (TFRecords) ─default Pipeline┘
    keras.utils.PyDataset ──────────────────────▶ Input(data=the PyDataset, steps=num_batches)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

import keras
import tensorflow as tf

from tfpipe.errors import SchemaError
from tfpipe.info import DatasetInfo
from tfpipe.schema import ClassLabel, Image

DEFAULT_BATCH_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Throughput:
    """How fast an input delivered batches.

    Attributes:
        examples_per_s: examples per second over the timed batches.
        batches_per_s: batches per second over the timed batches.
        first_batch_s: seconds until the first batch arrived (start-up cost).
        batches: how many batches were timed.
        examples: how many examples those batches held.
    """

    examples_per_s: float
    batches_per_s: float
    first_batch_s: float
    batches: int
    examples: int


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

    Example:
        >>> measure(iter([np.zeros((8, 4))] * 20), num_batches=10, warmup=2).examples
        80

    Args:
        batches: any iterable of batches (arrays, tensors, or tuples/dicts of them).
        num_batches: how many batches to time. Defaults to 50.
        warmup: batches iterated before the timing starts. Defaults to 5.
        max_seconds: stop timing after this long (at least one batch is timed).
            Defaults to None (no limit).
    """
    if num_batches < 1 or warmup < 0:
        raise ValueError(f"num_batches must be >= 1 and warmup >= 0, got {num_batches}, {warmup}")
    if max_seconds is not None and max_seconds <= 0:
        raise ValueError(f"max_seconds must be positive or None. Received: {max_seconds}")
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
    start = time.perf_counter()
    for batch in iterator:
        if count == 0 and warmup == 0:
            first_batch_s = time.perf_counter() - start
        examples += batch_size_of(batch)
        count += 1
        if count >= num_batches or time.perf_counter() - start >= deadline:
            break
    elapsed = max(time.perf_counter() - start, 1e-9)
    if count == 0:
        raise ValueError(f"the input ended during the {warmup} warm-up batches; nothing was timed")
    return Throughput(examples / elapsed, count / elapsed, first_batch_s, count, examples)


@dataclasses.dataclass(frozen=True)
class Input:
    """One training input in the form Keras consumes, with what is known about its size.

    Attributes:
        kind: "tf.data", "PyDataset", "Pipeline" or "TFRecords" (a path).
        data: the `tf.data.Dataset` (ending in a prefetch) or the `keras.utils.PyDataset`.
        steps: batches per epoch; None when unknown (a finite dataset Keras runs to its end)
            or infinite.
        infinite: the input repeats forever, so an epoch needs a `steps_per_epoch`.
        honours: the `tfpipe.fit` arguments this kind of input uses; others are warned about.
    """

    kind: str
    data: tf.data.Dataset | keras.utils.PyDataset
    steps: int | None
    infinite: bool = False
    honours: frozenset[str] = frozenset()

    def batches(self, *, repeat: bool = False) -> Iterator[Any]:
        """The batches of one epoch, or of epoch after epoch with `repeat=True`."""
        if isinstance(self.data, tf.data.Dataset):
            return iter(self.data.repeat() if repeat and not self.infinite else self.data)
        total = self.data.num_batches
        if total is None:
            indices: Iterable[int] = itertools.count()
        else:
            indices = itertools.cycle(range(total)) if repeat else range(total)
        return (self.data[i] for i in indices)


def adapt(
    data: Any,
    *,
    batch_size: int | None = None,
    shuffle: bool = True,
    image_size: tuple[int, int] | None = None,
    argument: str = "data",
) -> Input:
    """Turns any input tfpipe accepts into an `Input`: the one place that dispatches on kind.

    Example:
        >>> adapt(tf.data.Dataset.range(10).batch(4)).steps
        3

    Args:
        data: a `tfpipe.Pipeline`, a `tf.data.Dataset`, a `keras.utils.PyDataset`, or the path
            (prefix) of TFRecords written by tfpipe.
        batch_size: the batch size of the default Pipeline built for a path. Defaults to 32.
        shuffle: whether the default Pipeline built for a path shuffles. Defaults to True.
        image_size: `(height, width)` images are resized to when a path's schema does not fix
            one. Defaults to None.
        argument: the argument name used in error messages. Defaults to "data".
    """
    from tfpipe.loaders.pipeline import Pipeline

    if isinstance(data, Pipeline):
        return _from_dataset(data.build(), "Pipeline", steps_per_pass=data.batches_per_epoch())
    if isinstance(data, tf.data.Dataset):
        return _from_dataset(data, "tf.data")
    if isinstance(data, keras.utils.PyDataset):
        steps = data.num_batches
        return Input("PyDataset", data, steps, steps is None, honours=frozenset({"shuffle"}))
    if isinstance(data, str | os.PathLike):
        return _from_path(data, batch_size, shuffle, image_size, argument)
    raise TypeError(
        f"{argument} must be a tfpipe.Pipeline, a tf.data.Dataset, a keras.utils.PyDataset or "
        f"the path of tfpipe TFRecords. Received: {argument} of type {type(data).__name__}"
    )


def benchmark(
    data: Any,
    batches: int = 50,
    *,
    batch_size: int | None = None,
    image_size: tuple[int, int] | None = None,
    warmup: int = 5,
    max_seconds: float | None = None,
) -> Throughput:
    """Measures how fast an input delivers batches on its own, without a model.

    A finite input is iterated epoch after epoch until `warmup + batches` batches were seen.
    A `PyDataset` is read with a plain loop over its indices (its `workers` are not used).

    Example:
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

    Returns:
        A `Throughput`: examples/s, batches/s and the time to the first batch.
    """
    if isinstance(batches, bool) or not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches must be a positive int. Received: batches={batches!r}")
    source = adapt(data, batch_size=batch_size, shuffle=False, image_size=image_size)
    return measure(
        source.batches(repeat=True), num_batches=batches, warmup=warmup, max_seconds=max_seconds
    )


def _from_dataset(
    dataset: tf.data.Dataset,
    kind: str,
    *,
    steps_per_pass: int | None = None,
    honours: frozenset[str] = frozenset(),
) -> Input:
    """An Input over a dataset, ending in a prefetch; `steps_per_pass` (batches in one pass over
    the data, from metadata) sizes a repeated dataset and tells Keras the length of a finite
    one whose cardinality TensorFlow cannot know (e.g. TFRecords)."""
    cardinality = int(dataset.cardinality())
    infinite = cardinality == tf.data.INFINITE_CARDINALITY
    steps = cardinality if cardinality >= 0 else steps_per_pass
    if cardinality == tf.data.UNKNOWN_CARDINALITY and steps_per_pass is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps_per_pass))
    if type(dataset).__name__ != "_PrefetchDataset":
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return Input(kind, dataset, steps, infinite, honours)


def _from_path(
    path: str | os.PathLike[str],
    batch_size: int | None,
    shuffle: bool,
    image_size: tuple[int, int] | None,
    argument: str,
) -> Input:
    """The default Pipeline over tfpipe TFRecords: shuffle, batch, images as float32 in [0, 1]."""
    from tfpipe.loaders.pipeline import Pipeline

    info = DatasetInfo.load(path)
    images = [n for n, f in info.schema.items() if isinstance(f, Image)]
    labels = [n for n, f in info.schema.items() if isinstance(f, ClassLabel)]
    if len(images) != 1 or len(labels) != 1:
        raise SchemaError(
            f"{argument}={os.fspath(path)!r}: a default pipeline needs exactly one Image and one "
            f"ClassLabel feature, but the schema has {info.schema}. Build the input yourself: "
            "tfpipe.Pipeline(path).batch(32).as_supervised(x=[...], y=[...])"
        )
    size = batch_size or DEFAULT_BATCH_SIZE
    fixed = info.schema[images[0]].decoded_shape[:2]
    pipeline = Pipeline(path, image_size=None if None not in fixed else image_size, rescale=1 / 255)
    if shuffle:
        pipeline = pipeline.shuffle()
    pipeline = pipeline.batch(size).as_supervised(images[0], labels[0])
    return _from_dataset(
        pipeline.build(),
        "TFRecords",
        steps_per_pass=math.ceil(info.num_examples / size),
        honours=frozenset({"batch_size", "shuffle"}),
    )
