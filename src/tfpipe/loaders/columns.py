"""The columns of an in-memory source (`MemoryInput`) as graph values, and the mask files
read beside their images: what `tfpipe.loaders.inputs` turns a DataFrame, a folder or arrays
into before its graph gathers the examples of a batch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe.features import Mask
from tfpipe.features.mask import check_mask_sizes


def graph_constant(column: np.ndarray, paths: bool) -> tf.Tensor | tf.RaggedTensor:
    """A column as a graph constant: file paths as bytes; rows of different lengths (a
    variable-length Tensor) as a RaggedTensor, which `tf.gather` batches as records are."""
    if paths:
        return tf.constant(path_bytes(column))
    if column.dtype == object and len(column) and isinstance(column[0], np.ndarray):
        lengths = [len(row) for row in column]
        return tf.RaggedTensor.from_row_lengths(np.concatenate(list(column)), lengths)
    return tf.constant(column)


def load_mask(
    feature: Mask, name: str, size: tuple[int, int] | None, path: Any, images: dict[str, Any]
) -> np.ndarray:
    """A mask file read with Pillow, once compared in size with its example's image files
    (`images`: path by feature name)."""
    example = {name: os.fsdecode(path), **{key: os.fsdecode(p) for key, p in images.items()}}
    check_mask_sizes([(name, image) for image in images], example)
    return feature.load(example[name], size)


def path_bytes(paths: np.ndarray) -> np.ndarray:
    """File paths as the bytes the file system holds: names that are not UTF-8 (kept by Python
    as surrogate escapes) reach `tf.io.read_file` intact instead of failing to convert."""
    return np.asarray([os.fsencode(p) for p in paths], dtype=object)


def spec_of(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: spec_of(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return tuple(spec_of(v) for v in value)
    array = np.asarray(value)
    return tf.TensorSpec((None, *array.shape[1:]), tf.as_dtype(array.dtype))
