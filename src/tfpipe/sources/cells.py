"""Reading DataFrame cells: missing values, list strings, tag strings, inferred class labels,
and the features of a table's columns."""

from __future__ import annotations

import collections
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from tfpipe.errors import SourceError
from tfpipe.features import ClassLabel, Feature, Tensor, Text
from tfpipe.features.class_label import parse_list_cell

# A label column of at least this many rows with more distinct classes than half its rows is
# more likely a column of ids or file names than of classes.
MANY_ROWS = 20
_PATH_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".npy")
_INT = re.compile(r"[+-]?\d+")


def is_missing(value: Any) -> bool:
    """True for the cells pandas leaves empty: None, NaN, pd.NA."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def cells(column: pd.Series, missing: str | None = "label") -> list[Any]:
    """The cells of a column, with list-like strings such as "[1, 0, 3]" parsed (never evaluated)
    and integral floats (what pandas makes of ints next to an empty cell) made ints.

    A missing cell raises a SourceError naming the column and row, unless `missing` is None.
    """
    values = column.tolist()
    if missing is not None:
        for row, value in zip(column.index, values, strict=True):
            if is_missing(value):
                raise SourceError(f"{column.name}: missing {missing} in row {row}")
    if any(isinstance(v, str) and v.lstrip().startswith("[") for v in values):
        parsed = []
        for row, value in zip(column.index, values, strict=True):
            try:
                parsed.append(parse_list_cell(value) if isinstance(value, str) else value)
            except ValueError as e:
                raise SourceError(f"{column.name}: {e} in row {row}") from e
        return parsed
    return [_int_if_integral(v) for v in values]


def _int_if_integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def tag_cells(column: pd.Series, sep: str) -> list[list[str]]:
    """The tags of each cell of a tag-string column such as "haze primary water".

    Tags are split at `sep` (at any run of whitespace when `sep` is whitespace) and stripped;
    empty pieces and repeats are dropped, so stray spaces do not make tags. An empty or missing
    cell has no tags.
    """
    rows: list[list[str]] = []
    for value in column.tolist():
        if is_missing(value):
            rows.append([])
            continue
        text = str(_int_if_integral(value))
        pieces = text.split() if not sep.strip() else [p.strip() for p in text.split(sep)]
        rows.append(list(dict.fromkeys(p for p in pieces if p)))
    return rows


def as_indices(rows: list[list[str]]) -> list[list[Any]]:
    """Tag rows as class indices when every tag is an integer ("3 7"), else as they are."""
    if all(_INT.fullmatch(tag) for tags in rows for tag in tags):
        return [[int(tag) for tag in tags] for tags in rows]
    return rows


def infer_label(column: str, values: list[Any]) -> ClassLabel:
    """The ClassLabel of a column of class names or indices (lists of them: multi-label).

    Raises a SourceError when the names look like file paths: such a column holds images, and
    making one class per file would silently train on nonsense.
    """
    multi = any(isinstance(v, list | tuple | np.ndarray) for v in values)
    items = [x for v in values for x in v] if multi else values
    if not items:
        raise SourceError(f"{column}: no row has a class; the column cannot define the classes")
    if items and all(isinstance(x, str) for x in items):
        names = sorted(set(items))
        _refuse_paths(column, names, len(values))
        return ClassLabel(names=names, multi_label=multi)
    if all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in items):
        return ClassLabel(
            num_classes=max([int(x) for x in items], default=0) + 1, multi_label=multi
        )
    kinds = sorted({type(x).__name__ for x in items})
    raise SourceError(
        f"{column}: expected class names or int indices, got values of types {kinds}; "
        "declare the column in schema= (e.g. tfpipe.Tensor() for numbers) to read it otherwise"
    )


def _looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.lower().endswith(_PATH_SUFFIXES)


def _refuse_paths(column: str, names: list[str], rows: int) -> None:
    paths = [n for n in names if _looks_like_path(n)]
    if len(paths) * 2 > len(names):
        raise SourceError(
            f"label_cols: column {column!r} holds file paths (e.g. {paths[0]!r}; "
            f"{len(names)} distinct values among {rows} rows), not class names; read it as "
            f"images with image_cols=[..., {column!r}] (declare a mask as tfpipe.Mask in "
            "schema=), or declare it tfpipe.ClassLabel in schema= if these are class names"
        )


def crowding(values: list[Any]) -> int | None:
    """The number of distinct classes when a column of at least MANY_ROWS rows has more than
    half as many classes as rows (ids or names rather than classes); else None."""
    multi = any(isinstance(v, list) for v in values)
    distinct = len({x for v in values for x in v} if multi else set(values))
    return distinct if len(values) >= MANY_ROWS and distinct * 2 > len(values) else None


def _cell_kind(value: Any) -> str:
    """What one cell of a table holds: "number", "list" or "text" (a string such as "1.5" or
    "[1, 2]" counts as what it spells, as a CSV stores it)."""
    if isinstance(value, list | tuple | np.ndarray):
        return "list"
    if isinstance(value, bool | int | float | np.number):
        return "number"
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            return "list"
        try:
            return "number" if math.isfinite(float(value)) else "text"  # "nan" is no number
        except ValueError:
            return "text"
    return type(value).__name__


def _numbers_feature(values: list[Any], shape: tuple[int | None, ...]) -> Tensor:
    """An int64 Tensor when every value is an integer, else float32."""
    whole = all(
        isinstance(v, bool | int | np.integer) or (isinstance(v, str) and _INT.fullmatch(v.strip()))
        for v in values
    )
    return Tensor(shape=shape, dtype="int64" if whole else "float32")


def table_column(column: pd.Series, label: bool) -> tuple[Feature | None, pd.Series]:
    """The feature of a column of a table (a DataFrame without image paths) and its cells as
    the feature reads them (numbers written as text made numbers, list strings parsed).

    Every cell needs a value. A label column (`label_cols`) of floats is a regression target,
    `Tensor()`; of class names, ints or lists it gives None: its `ClassLabel` is inferred as
    for any label column. Another column: numbers are a `Tensor` of shape () (int64 when
    every cell is an integer, else float32), strings a `Text`, list cells ("[1, 2]" or real
    lists) a variable-length `Tensor(shape=(None,))`. The kind of most cells is the column's;
    a cell of another kind (text in a column of numbers, a number among lists) raises a
    SourceError naming the column, the row and the cell.
    """
    name, values = column.name, column.tolist()
    for row, value in zip(column.index, values, strict=True):
        if is_missing(value):
            raise SourceError(
                f"{name}: missing {'label' if label else 'value'} in row {row}; every cell of a "
                "table needs one: fill or drop the row (df.fillna(...), df.dropna()), or "
                f"declare the columns in schema=. Received: {value!r}"
            )
    if pd.api.types.is_float_dtype(column.dtype):
        return Tensor(), column
    if pd.api.types.is_bool_dtype(column.dtype) or pd.api.types.is_integer_dtype(column.dtype):
        return None if label else Tensor(dtype="int64"), column
    kinds = [_cell_kind(v) for v in values]
    kind = collections.Counter(kinds).most_common(1)[0][0]
    odd = [i for i, k in enumerate(kinds) if k != kind] if kind != "text" else []
    if odd or kind not in ("number", "list", "text"):
        at = odd[0] if odd else kinds.index(kind)
        raise SourceError(
            f"{name}: row {column.index[at]} holds {kinds[at]}, but most cells of the column "
            f"hold {kind}s; fix the cell, or declare the column in schema=. "
            f"Received: {values[at]!r}"
        )
    if label or kind == "text":
        return None if label else Text(), column
    if kind == "number":
        return _numbers_feature(values, ()), pd.to_numeric(column)
    lists = cells(column, None)
    for row, value, items in zip(column.index, values, lists, strict=True):
        wrong = [x for x in items if isinstance(x, str) or _cell_kind(x) != "number"]
        if wrong:
            raise SourceError(
                f"{name}: row {row} holds a list with {wrong[0]!r}; the list cells of a table "
                "hold numbers (a Tensor of shape (None,)): declare the column in schema= to "
                f"read it otherwise. Received: {value!r}"
            )
    feature = _numbers_feature([x for items in lists for x in items], (None,))
    return feature, pd.Series(lists, index=column.index, name=name)
