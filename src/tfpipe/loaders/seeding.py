"""Random tf.data stages whose draws only their own seed decides, never TensorFlow's global seed.

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
        >>> random = lambda: tf.data.Dataset.random(seed=3)
        >>> before = list(without_global_seed(random).take(2).as_numpy_iterator())
        >>> tf.random.set_seed(123)
        >>> after = list(without_global_seed(random).take(2).as_numpy_iterator())
        >>> tf.random.set_seed(None)
        >>> before == after
        True
    """

    @tf.function(autograph=False)  # a graph of its own, returning the dataset built in it
    def build(*inputs: Any) -> tf.data.Dataset:
        tf.compat.v1.get_default_graph().seed = None
        return step(*inputs)

    return build(*datasets)
