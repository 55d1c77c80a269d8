"""Seeded tf.data stages whose draws their seed alone decides, not TensorFlow's global seed.

A tf.data seed is combined with the global seed (`tf.random.set_seed`,
`keras.utils.set_random_seed`) of the graph it is created in, so the same `seed=3` would draw
otherwise after a training script sets one::

    step (Dataset.random, shuffle, ...) ──traced in a graph whose seed is None──▶ a dataset
        whose op seeds are (TensorFlow's default graph seed, seed): the same in every process,
        whatever the global seed; reshuffled or rerandomized each iteration as before

Random maps draw from one stateless seed per example, zipped onto the examples before their
parallel map (`example_seeds`, `map_with_seeds`), so a draw never depends on which thread ran
the call first: `tfpipe.augment.Joint` and the Keras layers `Pipeline.map` takes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf


def without_global_seed(
    step: Callable[..., tf.data.Dataset], *datasets: tf.data.Dataset
) -> tf.data.Dataset:
    """`step(*datasets)` built in a graph without the global seed: its seeded random ops draw
    the same whether or not `tf.random.set_seed` was called.

    Examples:
        >>> seeds = without_global_seed(lambda: tf.data.Dataset.random(seed=3))
        >>> [int(n) for n in seeds.take(2)]  # in every process, whatever the global seed
        [3534849767, 279844183]
    """

    @tf.function(autograph=False)  # a graph of its own, returning the dataset built in it
    def build(*inputs: Any) -> tf.data.Dataset:
        tf.compat.v1.get_default_graph().seed = None
        return step(*inputs)

    logger = tf.get_logger()
    logger.addFilter(_ONE_TRACE_EACH)
    try:
        return build(*datasets)
    finally:
        logger.removeFilter(_ONE_TRACE_EACH)


class _OneTraceEach(logging.Filter):
    """Drops TensorFlow's warning that `without_global_seed`'s `build` "triggered tf.function
    retracing": each call makes a new function and traces it once, on purpose (`tfpipe.fit`
    builds a Pipeline several times, and a user saw the warning on the fifth)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "without_global_seed" not in record.getMessage()


_ONE_TRACE_EACH = _OneTraceEach()


def shuffled(dataset: tf.data.Dataset, buffer: int, seed: Any) -> tf.data.Dataset:
    """`dataset.shuffle(buffer, seed)`, reshuffled each iteration; with a `seed` (an int or a
    scalar tensor), in an order that seed alone decides. Without one, the global seed still
    applies, as it does to any unseeded random op.

    Examples:
        >>> order = shuffled(tf.data.Dataset.range(5), 5, seed=0)
        >>> sorted(order.as_numpy_iterator()) == list(range(5))
        True
    """
    if seed is None:
        return dataset.shuffle(buffer, reshuffle_each_iteration=True)
    return without_global_seed(
        lambda examples: examples.shuffle(buffer, seed=seed, reshuffle_each_iteration=True),
        dataset,
    )


def example_seeds(seed: int, position: tuple[Any, Any] | None = None) -> tf.data.Dataset:
    """One stateless seed per example (a shape-(2,) int64 tensor), to zip onto the examples.

    Without `position`, `[seed, n]` with `n` from `tf.data.Dataset.random(seed)`: new every
    iteration (epoch), the same in every run, whatever the global seed. With `position`, the
    `(epoch, index of the first example)` of a `start_at` epoch (ints or scalar tensors), seeds
    folded from `(seed, epoch, index)`: the same whatever iterations came before.

    Examples:
        >>> first = [s.numpy().tolist() for s in example_seeds(7).take(2)]
        >>> resumed = [s.numpy().tolist() for s in example_seeds(7, (1, 5)).take(1)]
        >>> [s[0] for s in first], resumed == [s.numpy().tolist() for s in
        ...                                    example_seeds(7, (1, 5)).take(1)]
        ([7, 7], True)
    """
    if position is None:
        numbers = without_global_seed(
            lambda: tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        )
        key = tf.constant(seed, tf.int64)
        return numbers.map(tf.autograph.experimental.do_not_convert(lambda n: tf.stack([key, n])))
    epoch, first = position
    fold_in = tf.random.experimental.stateless_fold_in
    start = fold_in(tf.constant([seed, 0], tf.int64), tf.cast(epoch, tf.int64))
    indices = tf.data.Dataset.counter(tf.cast(first, tf.int64))
    return indices.map(tf.autograph.experimental.do_not_convert(lambda i: fold_in(start, i)))


def map_with_seeds(
    dataset: tf.data.Dataset,
    seeds: tf.data.Dataset,
    call: Callable[[Any, Any], Any],
    prepare: Callable[[Any], Any] | None = None,
) -> tf.data.Dataset:
    """`call(example, seed)` over `dataset` zipped with `seeds`, in a parallel map; `prepare`
    first turns each element into the example, in the same call. `call` is not converted by
    AutoGraph (an error it raises stays the same error).

    Examples:
        >>> noisy = map_with_seeds(tf.data.Dataset.range(3), example_seeds(0),
        ...                        lambda n, seed: n + tf.random.stateless_uniform(
        ...                            [], seed, maxval=10, dtype=tf.int64))
        >>> [int(n) for n in noisy]  # the same in every run
        [...]
    """
    call = tf.autograph.experimental.do_not_convert(call)
    if prepare is not None:
        inner = call
        call = lambda element, seed: inner(prepare(element), seed)  # noqa: E731
    return tf.data.Dataset.zip(dataset, seeds).map(call, num_parallel_calls=tf.data.AUTOTUNE)


def stage_seed(seed: int | None, index: int) -> int | None:
    """The seed of stage `index` of a pipeline seeded with `seed`, unrelated to the other
    stages' seeds; None without a seed.

    Examples:
        >>> stage_seed(0, 1) == stage_seed(0, 1) != stage_seed(0, 2), stage_seed(None, 1)
        (True, None)
    """
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
