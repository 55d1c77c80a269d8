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
    feature: Mask,
    name: str,
    size: tuple[int, int] | None,
    path: Any,
    images: dict[str, Any],
    where: str,
) -> np.ndarray:
    """A mask file read with Pillow, once compared in size with its example's image files
    (`images`: path by feature name). The Pipeline's graph and its fault search both read
    masks with it, so the error TensorFlow reports and the one tfpipe names say the same.

    Raises:
        ValueError: the mask cannot be read, holds a value that is not a class, or its size
            is not its images'; the message names the file, the value and `where` (the
            example's origin, "row 5 (images/a.png)", as `SequenceLoader` names it).
    """
    example = {name: os.fsdecode(path), **{key: os.fsdecode(p) for key, p in images.items()}}
    try:
        check_mask_sizes([(name, image) for image in images], example)
        return feature.load(example[name], size)
    except (TypeError, ValueError, OSError) as e:
        raise ValueError(f"{e} in {where}") from e


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
