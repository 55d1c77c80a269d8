"""Variable-length features through an unbatch and a batch again.

A `Tensor(shape=(None, ...))` (or a multi-label `ClassLabel`) is parsed per batch as a
`tf.RaggedTensor`. Wherever a pipeline unbatches (to decode images one example at a time, to
run the user's maps, after a shuffled cache) each value becomes a dense tensor of its own
length, which `Dataset.batch` cannot stack again. The batch after an unbatch is therefore
`Dataset.ragged_batch`: a list, a value whose first dimension alone is unknown (a list
feature, or boxes of shape `(None, 4)` a map makes), is a RaggedTensor again; any other value
of unknown shape (an image a map crops to a random size) must have one shape across the
batch, and is then batched densely, or fails naming the feature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from tfpipe.features.tracing import plain


def batch(dataset: tf.data.Dataset, size: int, drop_remainder: bool) -> tf.data.Dataset:
    """`dataset` (of single examples) in batches of `size`: lists (see `ragged_names`) as
    RaggedTensors, every other value as a dense tensor. A value of another unknown shape must
    have one shape across the batch: else the batch fails with an error naming it and the
    lengths received.

    Examples:
        >>> ds = tf.data.Dataset.range(1, 4).map(lambda n: {"ids": tf.range(n), "n": n})
        >>> first = next(iter(batch(ds, 3, drop_remainder=False)))
        >>> first["ids"].to_list(), first["n"].numpy().tolist()
        ([[0], [0, 1], [0, 1, 2]], [1, 2, 3])
    """
    spec = dataset.element_spec
    names = _flat_names(spec)
    specs = tf.nest.flatten(spec)
    dense = [name for name, s in zip(names, specs, strict=True) if _shape(s) == "other"]
    if all(_shape(s) == "known" for s in specs):
        return dataset.batch(size, drop_remainder=drop_remainder)
    batched = dataset.ragged_batch(size, drop_remainder=drop_remainder)
    if not dense:
        return batched

    def to_dense(*element: Any) -> Any:
        structure = element[0] if len(element) == 1 else element
        flat = [
            _uniform(value, name) if name in dense else value
            for name, value in zip(names, tf.nest.flatten(structure), strict=True)
        ]
        return tf.nest.pack_sequence_as(structure, flat)

    return batched.map(plain(to_dense), num_parallel_calls=tf.data.AUTOTUNE)


def ragged_names(spec: Any) -> list[str]:
    """The components of an example spec that `batch` gives as RaggedTensors: the lists,
    values whose first dimension alone is unknown.

    Examples:
        >>> ragged_names({"boxes": tf.TensorSpec([None, 4], tf.float32),
        ...               "label": tf.TensorSpec([], tf.int64)})
        ['boxes']
    """
    specs = tf.nest.flatten(spec)
    return [name for name, s in zip(_flat_names(spec), specs, strict=True) if _shape(s) == "list"]


def _shape(spec: Any) -> str:
    """How `ragged_batch` batches a component: "known" (densely, as `batch`), "list" (a
    RaggedTensor of ragged rank 1), "other" (ragged in other dimensions)."""
    if not isinstance(spec, tf.TensorSpec) or spec.shape.rank in (None, 0):
        return "known"
    if spec.shape.is_fully_defined():
        return "known"
    return "list" if spec.shape[1:].is_fully_defined() else "other"


def _flat_names(spec: Any) -> list[str]:
    """A name for each component of `spec` in `tf.nest.flatten` order: the feature name in a
    flat dict, else the component's position."""
    flat = tf.nest.flatten(spec)
    if isinstance(spec, Mapping) and len(flat) == len(spec):
        return sorted(spec)
    return [f"component {i}" for i in range(len(flat))]


def _uniform(values: tf.RaggedTensor, name: str) -> tf.Tensor:
    """A batch of values that `ragged_batch` made ragged as a dense tensor, once checked to
    have one shape (`to_tensor` alone would pad the smaller ones silently)."""
    lengths = values.nested_row_lengths()
    same = tf.reduce_all([tf.reduce_all(level == level[:1]) for level in lengths])
    check = tf.debugging.Assert(
        same,
        [
            f"{name}: values of different shapes in one batch; only a list (a "
            "value whose first dimension alone varies, as Tensor(shape=(None, ...))) is "
            "batched as a tf.RaggedTensor. Give it one shape in the map that makes it (resize "
            "or pad it). Received lengths, by dimension:",
            *lengths,
        ],
        summarize=16,
        name="uniform_check",
    )
    with tf.control_dependencies([check]):
        return values.to_tensor()
