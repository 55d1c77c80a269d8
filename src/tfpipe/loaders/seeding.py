"""Seeded tf.data stages whose draws their seed alone decides, not TensorFlow's global seed.

A tf.data seed is combined with the global seed (`tf.random.set_seed`,
`keras.utils.set_random_seed`) of the graph it is created in, so the same `seed=3` would draw
otherwise after a training script sets one::

    step (Dataset.random, shuffle, ...) ──traced in a graph whose seed is None──▶ a dataset
        whose op seeds are (TensorFlow's default graph seed, seed): the same in every process,
        whatever the global seed; reshuffled or rerandomized each iteration as before
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

    return build(*datasets)


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
