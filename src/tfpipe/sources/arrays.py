"""A source over in-memory numpy arrays (or anything `np.asarray` takes)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from tfpipe.errors import SourceError, TfpipeWarning
from tfpipe.features import ClassLabel, Feature, Image, Tensor, Text
from tfpipe.features.mask import check_mask_sizes, mask_image_pairs
from tfpipe.schema import Schema
from tfpipe.sources.base import SourceBase, multi_hot


def _as_rows(name: str, value: Any) -> np.ndarray:
    """`value` as an array of rows; rows of different lengths (lists of lists, of arrays) become
    an object array of one array per row, a `Tensor` with a variable first dimension."""
    try:
        return np.asarray(value)
    except ValueError as e:  # numpy: "inhomogeneous shape"
        if not isinstance(value, list | tuple):
            raise SourceError(f"arrays: {name!r} is not an array: {e}") from e
        rows = np.empty(len(value), dtype=object)
        for position, row in enumerate(value):  # one by one: numpy would broadcast a list
            rows[position] = np.asarray(row)
        return rows


def _variable_rows(name: str, array: np.ndarray) -> Tensor:
    """The Tensor of an object array of numeric rows that vary in their first dimension."""
    inner = {row.shape[1:] for row in array}
    kinds = {row.dtype for row in array if row.size}
    if len(inner) != 1 or any(k.kind not in "biuf" for k in kinds):
        raise SourceError(
            f"arrays: {name!r} holds rows of shapes {sorted(inner)} and dtypes "
            f"{sorted(k.name for k in kinds)}; a variable-length Tensor needs numeric rows that "
            "differ in their first dimension only"
        )
    dtype = np.result_type(*kinds) if kinds else np.dtype("float32")
    return Tensor(shape=(None, *inner.pop()), dtype=dtype.name)


def _infer_feature(name: str, array: np.ndarray) -> Feature:
    if (
        array.dtype == np.uint8
        and array.ndim in (3, 4)
        and (array.ndim == 3 or array.shape[-1] in (1, 3, 4))
    ):
        height, width = array.shape[1:3]
        channels = 1 if array.ndim == 3 else array.shape[-1]
        return Image(shape=(height, width, channels), encoding="raw")
    if array.dtype == object and len(array) and all(isinstance(v, np.ndarray) for v in array):
        return _variable_rows(name, array)
    if array.dtype.kind in "US" or array.dtype == object:
        return Text()
    if "label" in name.lower() and array.dtype.kind in "iu" and array.ndim == 1:
        return ClassLabel(num_classes=int(array.max()) + 1)
    _warn_if_a_guess(name, array)
    return Tensor(shape=array.shape[1:], dtype=array.dtype.name)


def _looks_like_images(array: np.ndarray) -> bool:
    """Float arrays of (N, H, W) or (N, H, W, 1/3/4), at least 8x8: maybe images."""
    if array.dtype.kind != "f" or array.ndim not in (3, 4):
        return False
    return min(array.shape[1:3]) >= 8 and (array.ndim == 3 or array.shape[-1] in (1, 3, 4))


def _looks_like_classes(array: np.ndarray) -> bool:
    """1-D integer arrays of few values >= 0, each seen twice on average: maybe classes."""
    if array.dtype.kind not in "iu" or array.ndim != 1 or array.min() < 0:
        return False
    distinct = len(np.unique(array))
    return distinct <= 1000 and 2 * distinct <= len(array)


def _warn_if_a_guess(name: str, array: np.ndarray) -> None:
    """Warns when an array made a Tensor looks like images or class labels: says why it was
    not made one, and how to choose."""
    keep = "to keep a Tensor, declare the schema with schema= (which silences this)"
    if _looks_like_images(array):
        why = (
            f"({array.dtype.name} of shape {array.shape}) was made a Tensor, not an Image: only "
            "uint8 arrays become Images. For images, pass (array * 255).astype(np.uint8) when "
            f"its values are in [0, 1] or array.astype(np.uint8) when in [0, 255]; {keep}"
        )
    elif _looks_like_classes(array):
        classes = int(array.max()) + 1
        why = (
            f"({array.dtype.name}, {len(np.unique(array))} distinct values in {len(array)} "
            "rows) was made a Tensor, not a ClassLabel: only integer arrays whose name "
            f"contains 'label' become ClassLabels. For classes, name it e.g. '{name}_label' or "
            f"declare tfpipe.ClassLabel(num_classes={classes}) with schema=; {keep}"
        )
    else:
        return
    warnings.warn(f"arrays: {name!r} {why}", TfpipeWarning, stacklevel=6)


class ArraySource(SourceBase):
    """Examples are the rows of equally long arrays: `src[i] = {name: array[i]}`.

    Examples:
        >>> src = tfpipe.from_arrays({"image": np.zeros((10, 28, 28), np.uint8),
        ...                           "label": np.arange(10) % 3})
        >>> src.schema["image"]
        Image(shape=(28, 28, 1), encoding='raw', quality=95)
    """

    def __init__(self, arrays: Mapping[str, Any], schema: Schema | None = None) -> None:
        if not isinstance(arrays, Mapping) or not arrays:
            raise SourceError(f"arrays must be a non-empty dict of name -> array, got {arrays!r}")
        self.arrays = {name: _as_rows(name, value) for name, value in arrays.items()}
        lengths = {name: len(a) if a.ndim else -1 for name, a in self.arrays.items()}
        if len(set(lengths.values())) != 1 or -1 in lengths.values():
            raise SourceError(f"arrays must share their first dimension, got lengths {lengths}")
        self._length = next(iter(lengths.values()))
        if self._length == 0:
            raise SourceError("arrays are empty: a source needs at least one example")
        self.schema = (
            schema
            if schema is not None
            else Schema({name: _infer_feature(name, a) for name, a in self.arrays.items()})
        )
        self.schema.check_names(list(self.arrays), "arrays")
        try:  # arrays of rows hold one size: the first example is every example
            pairs = mask_image_pairs({name: self.schema[name] for name in self.arrays})
            check_mask_sizes(pairs, self[0])
        except ValueError as e:
            raise SourceError(f"arrays: {e}") from e

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = self.check_index(index)
        return {name: array[index] for name, array in self.arrays.items()}

    def labels(self) -> np.ndarray | None:
        for name, feature in self.schema.of(ClassLabel).items():
            if not feature.multi_label:
                values = self.arrays[name]
                if values.dtype.kind in "iu":
                    return values
                return np.asarray([feature.index(v) for v in values], np.int64)  # class names
        return None

    def label_sets(self) -> np.ndarray | None:
        for name, feature in self.schema.of(ClassLabel).items():
            if feature.multi_label:
                return multi_hot(feature, self.arrays[name])
        return None

    def columns(self) -> dict[str, np.ndarray] | None:
        return {
            name: self.schema[name].array_column(name, array) for name, array in self.arrays.items()
        }


def from_arrays(arrays: Mapping[str, Any], schema: Schema | None = None) -> ArraySource:
    """A source over numpy arrays that share their first dimension.

    uint8 arrays of shape (N, H, W) or (N, H, W, C) become raw `Image` features, 1-D integer
    arrays whose name contains "label" become `ClassLabel`, strings become `Text`, anything
    else a `Tensor`; a list of rows of different lengths (e.g. token ids) becomes a `Tensor`
    with a variable first dimension. Pass `schema=` to choose. A `TfpipeWarning` says when a
    Tensor was a guess: a float array shaped like images (only uint8 arrays become Images), or
    integers of few distinct values not named "label" (only those named so become ClassLabels).

    Examples:
        >>> x_train, y_train = np.zeros((100, 28, 28), np.uint8), np.arange(100) % 10
        >>> src = tfpipe.from_arrays({"image": x_train, "label": y_train})
        >>> len(src), src.schema["label"]
        (100, ClassLabel(names=None, num_classes=10, multi_label=False))

    Args:
        arrays: feature name -> array of N examples.
        schema: the schema; inferred from dtypes and shapes when None. Defaults to None.
    """
    return ArraySource(arrays, schema)
