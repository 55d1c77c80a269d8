"""A source over a pandas DataFrame of image paths and label columns."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tfpipe.errors import DataNotFoundError, SourceError, TfpipeWarning
from tfpipe.features import ClassLabel, Feature, Image, Mask
from tfpipe.features.class_label import parse_list_cell
from tfpipe.schema import Schema
from tfpipe.sources.base import SourceBase


def _cell_values(column: pd.Series) -> list[Any]:
    """The cells of a label column, with list-like strings such as "[1, 0, 3]" parsed."""
    values = column.tolist()
    for row, value in zip(column.index, values, strict=True):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            raise SourceError(f"{column.name}: missing label in row {row}")
    if any(isinstance(v, str) and v.lstrip().startswith("[") for v in values):
        parsed = []
        for row, value in zip(column.index, values, strict=True):
            try:
                parsed.append(parse_list_cell(value) if isinstance(value, str) else value)
            except ValueError as e:
                raise SourceError(f"{column.name}: {e} in row {row}") from e
        return parsed
    return [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]


def _infer_label(values: list[Any]) -> ClassLabel:
    multi = any(isinstance(v, list | tuple | np.ndarray) for v in values)
    items = [x for v in values for x in v] if multi else values
    if items and all(isinstance(x, str) for x in items):
        return ClassLabel(names=sorted(set(items)), multi_label=multi)
    if all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in items):
        return ClassLabel(
            num_classes=max([int(x) for x in items], default=0) + 1, multi_label=multi
        )
    kinds = sorted({type(x).__name__ for x in items})
    raise TypeError(f"expected class names or int indices, got values of types {kinds}")


class DataFrameSource(SourceBase):
    """One example per row: `{"image": <path>, <label column>: <label>, ...}`.

    Label cells are validated and turned into class indices once, at construction; only
    compact arrays are kept (no DataFrame), so the source pickles cheaply to worker processes.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        path_col: str = "path",
        label_cols: Sequence[str] = ("label",),
        base_dir: str | os.PathLike[str] | None = None,
        schema: Schema | None = None,
        image_shape: tuple[int | None, int | None, int] = (None, None, 3),
    ) -> None:
        if not isinstance(df, pd.DataFrame):
            raise SourceError(f"df must be a pandas DataFrame, got {type(df).__name__}")
        if isinstance(label_cols, str):
            label_cols = [label_cols]
        for argument, column in [("path_col", path_col)] + [("label_cols", c) for c in label_cols]:
            if column not in df.columns:
                raise SourceError(
                    f"{argument}: column {column!r} is not in the DataFrame; "
                    f"it has {list(df.columns)}"
                )
        if "image" in label_cols:
            raise SourceError("label_cols: 'image' is the name of the image feature")
        if len(df) == 0:
            raise SourceError("df is empty: a source needs at least one row")
        base = Path(base_dir) if base_dir is not None else None
        self.paths = _file_paths(df, path_col, base)
        features: dict[str, Feature] = {"image": Image(shape=image_shape)}
        self.label_values: dict[str, list[Any]] = {}
        self.mask_paths: dict[str, np.ndarray] = {}
        for column in label_cols:
            if schema is not None and isinstance(schema.get(column), Mask):
                self.mask_paths[column] = _file_paths(df, column, base)
                features[column] = schema[column]
                continue
            values = _cell_values(df[column])
            try:
                feature = schema[column] if schema is not None else _infer_label(values)
            except TypeError as e:
                raise SourceError(f"{column}: {e}") from e
            if not isinstance(feature, ClassLabel):
                raise SourceError(
                    f"{column}: label columns need a ClassLabel feature, "
                    f"got {type(feature).__name__}"
                )
            self.label_values[column] = [
                _indices(feature, value, column, row)
                for row, value in zip(df.index, values, strict=True)
            ]
            features[column] = feature
        self.rows = np.asarray(df.index)
        self.schema = schema if schema is not None else Schema(features)
        self.schema.check_names(list(features), "label_cols")
        self._groups = self._check_duplicates(path_col)

    def _check_duplicates(self, path_col: str) -> np.ndarray | None:
        """Group numbers of rows naming one image file (None when no file repeats).

        Rows of one image must agree on every label; repeats are warned about once.
        """
        keys = [os.path.normpath(os.path.abspath(p)) for p in self.paths]
        _, firsts, groups = np.unique(keys, return_index=True, return_inverse=True)
        repeats = np.flatnonzero(firsts[groups] != np.arange(len(keys)))
        if not len(repeats):
            return None
        for row in repeats:
            first = firsts[groups[row]]
            for column, values in self.label_values.items():
                if _label_set(values[row]) != _label_set(values[first]):
                    raise SourceError(
                        f"{column}: rows {self.rows[first]} and {self.rows[row]} name the same "
                        f"image {str(self.paths[row])!r} with different labels "
                        f"({_label_text(self.schema[column], values[first])} and "
                        f"{_label_text(self.schema[column], values[row])}); fix or remove one "
                        "of the rows, "
                        "or give an image several classes in one row with a list cell such as "
                        "\"['cat', 'dog']\""
                    )
        row, first = repeats[0], firsts[groups[repeats[0]]]
        warnings.warn(
            f"{path_col}: {len(repeats)} row(s) repeat the image of an earlier row (first: row "
            f"{self.rows[row]} repeats row {self.rows[first]}, {str(self.paths[row])!r}); they "
            "are kept, so these images count more in training, and split() keeps all rows of "
            "one image in one split",
            TfpipeWarning,
            stacklevel=4,
        )
        return np.asarray(groups, np.int64).ravel()

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = self.check_index(index)
        example: dict[str, Any] = {"image": str(self.paths[index])}
        for column, values in self.label_values.items():
            example[column] = values[index]
        for column, paths in self.mask_paths.items():
            example[column] = str(paths[index])
        return example

    def origin(self, index: int) -> str:
        index = self.check_index(index)
        return f"row {self.rows[index]} ({self.paths[index]})"

    def groups(self) -> np.ndarray | None:
        return self._groups

    def labels(self) -> np.ndarray | None:
        for values in self.label_values.values():
            if values and isinstance(values[0], int):
                return np.asarray(values, np.int64)
        return None


def _file_paths(df: pd.DataFrame, column: str, base: Path | None) -> np.ndarray:
    """The paths of a column of image (or mask) files, from `base`; raises when one is missing."""
    paths = np.asarray(
        [
            str(base / p) if base is not None and not os.path.isabs(p) else str(p)
            for p in df[column].astype(str)
        ]
    )
    missing = [(row, p) for row, p in zip(df.index, paths, strict=True) if not os.path.isfile(p)]
    if missing:
        row, path = missing[0]
        raise DataNotFoundError(
            f"{column}: {len(missing)} image file(s) do not exist, "
            f"first {str(path)!r} in row {row}"
            + ("" if base is not None else "; pass base_dir= if the paths are relative")
        )
    return paths


def _label_text(feature: Any, value: int | list[int]) -> str:
    """A label as its class name(s) when the ClassLabel has names, else as index(es)."""
    names = feature.names
    if names is None:
        return repr(value)
    return repr([names[i] for i in value] if isinstance(value, list) else names[value])


def _label_set(value: int | list[int]) -> frozenset[int]:
    return frozenset(value) if isinstance(value, list) else frozenset([value])


def _indices(feature: ClassLabel, value: Any, column: str, row: Any) -> int | list[int]:
    try:
        indices = feature.indices(value)
    except (TypeError, ValueError) as e:
        raise SourceError(f"{column}: {e} in row {row}") from e
    return indices if feature.multi_label else indices[0]


def from_dataframe(
    df: pd.DataFrame,
    *,
    path_col: str = "path",
    label_cols: Sequence[str] = ("label",),
    base_dir: str | os.PathLike[str] | None = None,
    schema: Schema | None = None,
    image_shape: tuple[int | None, int | None, int] = (None, None, 3),
) -> DataFrameSource:
    """A source over a DataFrame with an image path column and label columns.

    Label cells may be class indices, class names, or lists (a real list or a string such as
    "[1, 0, 3]", parsed safely): a list column becomes a multi-label `ClassLabel`. Each label
    column is its own feature, so several columns give several model outputs.

    Example:
        >>> df = pd.DataFrame({"path": ["a.jpg", "b.jpg"], "weather": ["clear", "haze"],
        ...                    "ground": ["[0, 2]", "[1]"]})
        >>> src = tfpipe.from_dataframe(df, label_cols=["weather", "ground"], base_dir="img")

    Args:
        df: the DataFrame, one row per image.
        path_col: the column of image paths. Defaults to "path".
        label_cols: the label columns, each a feature of the schema; a column that `schema`
            declares as a `tfpipe.Mask` holds mask file paths (from `base_dir`, like the
            images). Defaults to ("label",).
        base_dir: the folder relative paths start from. Defaults to None.
        schema: the schema to use instead of inferring one (class name order, image shape).
            Defaults to None.
        image_shape: the `Image` shape of an inferred schema. Defaults to (None, None, 3).
    """
    return DataFrameSource(df, path_col, label_cols, base_dir, schema, image_shape)
