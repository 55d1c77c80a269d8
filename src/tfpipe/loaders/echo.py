"""Data echoing (Choi et al. 2019): every example, or every batch, used `factor` times.

    fresh elements ──ragged_batch(window)──▶ windows, each zipped with a seed
        ──flat_map──▶ `factor` rounds per window, each a stateless permutation of it
        (a round never starts with the element the one before ended with)

Only one window is held at a time, never `factor` copies of it. A copy of an element is on
average `window` elements from the one before, and always fewer than `2 * window`. Resuming
(`Pipeline.start_at`) skips whole windows as raw records before decoding (`Echo.resume`),
then the echoed elements before the start inside its window.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from typing import Any

import tensorflow as tf

from tfpipe.checks import check_int
from tfpipe.loaders.seeding import example_seeds

UNITS = ("example", "batch")
DEFAULT_WINDOWS = {"example": 1024, "batch": 16}  # examples at most / batches


@dataclasses.dataclass(frozen=True)
class Echo:
    """What `Pipeline.echo` asked for: the factor, the unit and the window size (None: the
    default, see `window`)."""

    factor: int
    unit: str
    buffer_size: int | None = None

    def __post_init__(self) -> None:
        check_int("factor", self.factor)
        if self.unit not in UNITS:
            raise ValueError(f'unit must be "example" or "batch". Received: unit={self.unit!r}')
        if self.buffer_size is not None:
            check_int("buffer_size", self.buffer_size)

    def window(self, fresh: int | None) -> int:
        """The elements of a window: `buffer_size`, else for examples min(`fresh` examples
        per epoch, 1024), for batches 16.

        Examples:
            >>> Echo(2, "example").window(300), Echo(2, "batch").window(300)
            (300, 16)
        """
        default = DEFAULT_WINDOWS[self.unit]
        if self.buffer_size is not None:
            return self.buffer_size
        return min(fresh or default, default) if self.unit == "example" else default

    def describe(self, window: int) -> str:
        """The echo stage, for `explain()`."""
        plural = "es" if self.unit == "batch" else "s"
        return (
            f"echo each {self.unit} {self.factor} times (windows of {window} {self.unit}"
            f"{plural}, a new random order each time)"
        )

    def resume(self, position: Any, window: int) -> tuple[Any, Any]:
        """For an echoed element `position` (ints or int64 tensors): the windows before the
        one holding it, and its place in that window's echoed elements.

        Examples:
            >>> Echo(3, "example").resume(25, window=4)  # 12 echoed elements per window
            (2, 1)
        """
        per_window = self.factor * window
        return position // per_window, position % per_window


def echoed(
    dataset: tf.data.Dataset, echo: Echo, window: int, seeds: tf.data.Dataset
) -> tf.data.Dataset:
    """`dataset` with every element `echo.factor` times, in windows of `window` elements, each
    window's rounds ordered from its seed (a shape-(2,) int64 tensor of `seeds`).

    Examples:
        >>> ds = echoed(tf.data.Dataset.range(4), Echo(2, "example"), 4, example_seeds(0))
        >>> sorted(int(n) for n in ds)
        [0, 0, 1, 1, 2, 2, 3, 3]
    """
    spec = dataset.element_spec
    factor = echo.factor

    @tf.autograph.experimental.do_not_convert
    def rounds(elements: Any, seed: tf.Tensor) -> tf.data.Dataset:
        size = tf.shape(tf.nest.flatten(elements)[0], out_type=tf.int64)[0]
        order = _order(size, factor, seed)
        return tf.data.Dataset.from_tensor_slices(order).map(
            tf.autograph.experimental.do_not_convert(
                lambda i: tf.nest.map_structure(lambda s, v: _row(s, v, i), spec, elements)
            )
        )

    if all(_fixed(part) for part in tf.nest.flatten(spec)):  # one gather per round
        windows, rounds = dataset.batch(window), functools.partial(_gathered, factor)
    else:  # some rows have lengths of their own: each row taken from a ragged window
        windows = dataset.ragged_batch(window)
    return tf.data.Dataset.zip(windows, seeds).flat_map(rounds)


def _fixed(spec: Any) -> bool:
    """Whether every element has this one shape (a window of them is a dense tensor)."""
    return isinstance(spec, tf.TensorSpec) and spec.shape.is_fully_defined()


@tf.autograph.experimental.do_not_convert
def _gathered(factor: int, elements: Any, seed: tf.Tensor) -> tf.data.Dataset:
    """The rounds of a dense window: each round's elements gathered at once, then sliced
    (only one round is held beside the window)."""
    size = tf.shape(tf.nest.flatten(elements)[0], out_type=tf.int64)[0]
    orders = tf.reshape(_order(size, factor, seed), [factor, size])
    return tf.data.Dataset.from_tensor_slices(orders).flat_map(
        lambda order: tf.data.Dataset.from_tensor_slices(
            tf.nest.map_structure(lambda values: tf.gather(values, order), elements)
        )
    )


def window_seeds(seed: int | None, position: tuple[Any, Any] | None = None) -> tf.data.Dataset:
    """One seed per window: from `seed` (new every iteration), or from `(seed, epoch, window
    index)` with `position` (`(epoch, first window)` of a `start_at` epoch); without a seed,
    new every run.

    Examples:
        >>> [s.numpy().tolist() for s in window_seeds(0, (1, 2)).take(1)] == [
        ...     s.numpy().tolist() for s in window_seeds(0, (1, 2)).take(1)]
        True
    """
    if seed is None:
        seed = random.SystemRandom().randrange(2**62)
    return example_seeds(seed, position)


def _order(size: tf.Tensor, factor: int, seed: tf.Tensor) -> tf.Tensor:
    """`factor` permutations of range(size), one after the other, each drawn from `seed` and
    its round; a round that would start with the element the one before ended with has its
    first two swapped."""
    fold_in = tf.random.experimental.stateless_fold_in
    indices = tf.range(size)
    rounds: list[tf.Tensor] = []
    for number in range(factor):
        order = tf.random.experimental.stateless_shuffle(indices, seed=fold_in(seed, number))
        if rounds:
            swapped = tf.concat([order[1:2], order[:1], order[2:]], axis=0)
            order = tf.where(order[0] == rounds[-1][-1], swapped, order)
        rounds.append(order)
    return tf.concat(rounds, axis=0)


def _row(spec: Any, values: Any, index: tf.Tensor) -> Any:
    """Element `index` of a window, as the element spec has it: a dense value that
    `ragged_batch` made ragged (a short batch, an image of its own size) is dense again, which
    holds no padding (one element's rows have one length)."""
    row = values[index]
    if isinstance(spec, tf.TensorSpec) and isinstance(row, tf.RaggedTensor):
        return tf.ensure_shape(row.to_tensor(), spec.shape)
    return row
