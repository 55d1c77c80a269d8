"""A source over a pandas DataFrame: image path columns, label, tensor and text columns."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tfpipe.errors import DataNotFoundError, SourceError, TfpipeWarning
from tfpipe.features import ClassLabel, Feature, Image
from tfpipe.schema import Schema
from tfpipe.sources.base import SourceBase, multi_hot
from tfpipe.sources.cells import (
    as_indices,
    cells,
    crowding,
    infer_label,
    is_missing,
    table_column,
    tag_cells,
)

PerColumn = str | Mapping[str, str] | None


def file_image(image_shape: tuple[int | None, int | None, int] = (None, None, 3)) -> Image:
    """The feature a column of image files is stored as without a schema: each file in the
    format it came in (a JPEG copied, a PNG kept PNG; see `Image(encoding="auto")`).

    Examples:
        >>> file_image().encoding
        'auto'
    """
    return Image(shape=image_shape, encoding="auto")


def reads_file(feature: Feature) -> bool:
    """True for the features whose DataFrame cell is a file path (Image, Mask, ...); False for
    those that hold their value in the cell itself (ClassLabel, Tensor, Text)."""
    return feature.reads_file


def _names(argument: str, value: str | Sequence[str]) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) and n for n in names):
        raise SourceError(f"{argument} must be a list of column names. Received: {value!r}")
    return names


class DataFrameColumns:
    """Which columns of a DataFrame (pandas or Spark: its column names) are read as files and
    which as values, by feature name: what `path_col`, `image_cols`, `label_cols` and `schema`
    mean to `from_dataframe` and `tfpipe.spark.write_tfrecords` alike.

    `files` maps each file feature to its column (the legacy `path_col` gives the feature
    "image"); every other feature is read from the column of its own name. Without a schema
    and without a column of image paths (no `path_col`, `image_cols`, column "path" or
    "image"), the DataFrame is a `table`: every column is a feature, `labels` its targets.
    """

    def __init__(
        self,
        columns: Sequence[str],
        *,
        path_col: str | None,
        image_cols: str | Sequence[str] | None,
        label_cols: str | Sequence[str] | None,
        schema: Schema | None,
    ) -> None:
        self.arguments: dict[str, str] = {}  # feature -> the argument that named it
        if image_cols is not None and path_col is not None:
            raise SourceError(
                "path_col and image_cols: pass one of them; path_col= reads one image column as "
                "the feature 'image', image_cols= reads each listed column as a feature of its "
                f"own name. Received: path_col={path_col!r}, image_cols={image_cols!r}"
            )
        if image_cols is not None:
            self.files = {c: c for c in _names("image_cols", image_cols)}
            self.arguments.update(dict.fromkeys(self.files, "image_cols"))
        elif schema is None and path_col is None and not {"path", "image"} & set(columns):
            self.files = {}  # a table
        elif schema is None or "image" in schema or path_col is not None:
            own = "image" in columns and ("path" not in columns or schema is not None)
            default = "image" if own else "path"
            self.files = {"image": path_col or default}
            self.arguments["image"] = "path_col"
        else:
            self.files = {}
        self.table = schema is None and not self.files
        if label_cols is not None:
            self.values = _names("label_cols", label_cols)
        elif schema is not None:
            self.values = [n for n in schema if n not in self.files and not reads_file(schema[n])]
        else:
            self.values = ["label"] if not self.table or "label" in columns else []
        self.labels = self.values
        if self.table:
            self.values = [*map(str, columns), *(n for n in self.labels if n not in columns)]
        self.arguments.update({n: "label_cols" for n in self.values if n not in self.arguments})
        if schema is not None:
            self._follow(schema)
            self.labels = self.values
        both = [n for n in self.values if n in self.files]
        if both:
            raise SourceError(
                f"label_cols: {both[0]!r} is also an image feature ({self.arguments[both[0]]}); "
                "a feature is read either as a file path or as a value"
            )
        for name, column in [*self.files.items(), *((n, n) for n in self.values)]:
            if column not in columns:
                raise SourceError(
                    f"{self.arguments[name]}: column {column!r} is not in the DataFrame; "
                    f"it has {list(columns)}"
                )

    def _follow(self, schema: Schema) -> None:
        """Reads the schema's file features as files, and checks it covers every feature."""
        for name, argument in self.arguments.items():
            if name not in schema:
                raise SourceError(
                    f"{argument}: feature {name!r} is not in the schema; it has {list(schema)}"
                )
        for name in schema:
            if reads_file(schema[name]) and name not in self.files:
                self.files[name] = name
                self.arguments.setdefault(name, "schema")
        self.values = [n for n in self.values if n not in self.files]
        for name in self.files:
            if not reads_file(schema[name]):
                raise SourceError(
                    f"{self.arguments[name]}: column {self.files[name]!r} is read as file paths, "
                    f"but schema= declares {name!r} as {type(schema[name]).__name__}"
                )
        unread = [n for n in schema if n not in self.files and n not in self.values]
        if unread:
            raise SourceError(
                f"schema: feature {unread[0]!r} has no column to read; add it to label_cols "
                "(or image_cols), or drop it from the schema"
            )


def _per_column(argument: str, value: PerColumn, names: Sequence[str]) -> dict[str, str]:
    """A per-column option: one string for every column in `names`, or a column -> string map."""
    if value is None:
        return {}
    if not names:
        raise SourceError(f"{argument} is given, but there is no column it could apply to")
    chosen = {n: value for n in names} if isinstance(value, str) else dict(value)
    for name, text in chosen.items():
        if name not in names:
            raise SourceError(f"{argument}: {name!r} is not one of the columns {list(names)}")
        if not isinstance(text, str) or not text:
            raise SourceError(f"{argument} must be a non-empty string. Received: {text!r}")
    return chosen


def _file_paths(
    column: pd.Series, base_dir: str | os.PathLike[str] | None, suffix: str | None
) -> np.ndarray:
    """The paths of a file column (base_dir joined, suffix added); every file must exist."""
    base = Path(base_dir) if base_dir is not None else None
    raw = column.tolist()
    names = []
    for row, cell in zip(column.index, raw, strict=True):
        if is_missing(cell):
            raise SourceError(f"{column.name}: missing file path in row {row}")
        names.append(str(cell) + (suffix or ""))
    paths = np.asarray(
        [str(base / n) if base is not None and not os.path.isabs(n) else n for n in names]
    )
    missing = [i for i, p in enumerate(paths) if not os.path.isfile(p)]
    if missing:
        row, path, cell = column.index[missing[0]], paths[missing[0]], raw[missing[0]]
        raise DataNotFoundError(
            f"{column.name}: {len(missing)} image file(s) do not exist, "
            f"first {str(path)!r} in row {row}"
            + (f" (the cell {cell!r} + image_suffix {suffix!r})" if suffix else "")
            + ("" if base is not None else "; pass base_dir= if the paths are relative")
        )
    return paths


class DataFrameSource(SourceBase):
    """One example per row: a file path per image column, a value per label/tensor/text column.

    Cells are validated (files exist, labels are known classes) and turned into class indices
    once, at construction; only compact arrays are kept (no DataFrame), so the source pickles
    cheaply to worker processes.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        path_col: str | None = None,
        label_cols: str | Sequence[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        schema: Schema | None = None,
        image_shape: tuple[int | None, int | None, int] = (None, None, 3),
        image_cols: str | Sequence[str] | None = None,
        label_sep: PerColumn = None,
        image_suffix: PerColumn = None,
    ) -> None:
        if not isinstance(df, pd.DataFrame):
            raise SourceError(f"df must be a pandas DataFrame, got {type(df).__name__}")
        if schema is not None and not isinstance(schema, Schema):
            raise SourceError(f"schema must be a tfpipe.Schema, got {type(schema).__name__}")
        plan = DataFrameColumns(
            list(df.columns),
            path_col=path_col,
            image_cols=image_cols,
            label_cols=label_cols,
            schema=schema,
        )
        if len(df) == 0:
            raise SourceError("df is empty: a source needs at least one row")
        suffixes = _per_column("image_suffix", image_suffix, list(plan.files))
        self.rows = np.asarray(df.index)
        self.files = {
            name: _file_paths(df[column], base_dir, suffixes.get(name))
            for name, column in plan.files.items()
        }
        features: dict[str, Feature] = {
            name: schema[name] if schema is not None else file_image(image_shape)
            for name in self.files
        }
        separators = _per_column("label_sep", label_sep, plan.labels)
        labels = {} if schema is None else schema.of(ClassLabel)
        if isinstance(label_sep, str) and schema is not None:
            separators = {n: s for n, s in separators.items() if _multi_label(labels.get(n))}
            if not separators:
                raise SourceError(
                    "label_sep: schema= declares no multi-label ClassLabel among label_cols "
                    f"{plan.values}; tag strings need ClassLabel(..., multi_label=True)"
                )
        self.values: dict[str, list[Any]] = {}
        for name in plan.values:
            given, column = schema[name] if schema is not None else None, df[name]
            if plan.table:
                given, column = table_column(column, name in plan.labels)
            features[name], self.values[name] = self._value_column(
                column, given, labels.get(name), separators.get(name)
            )
        self.schema = schema if schema is not None else Schema(features)
        self.paths = next(iter(self.files.values()), None)
        self._groups = self._check_duplicates(next(iter(plan.files.values()), ""))

    def _value_column(
        self,
        column: pd.Series,
        feature: Feature | None,
        label: ClassLabel | None,
        sep: str | None,
    ) -> tuple[Feature, list[Any]]:
        """The feature of a value column (inferred: a ClassLabel) and its validated values;
        `label` is `feature` when it is a ClassLabel."""
        name = str(column.name)
        if sep is not None and not (feature is None or _multi_label(label)):
            raise SourceError(
                f"label_sep: column {name!r} is declared {feature!r} in schema=; tag strings "
                "need ClassLabel(..., multi_label=True)"
            )
        if feature is not None and feature.dtype == "str":  # Text: the cells as they are
            values = column.tolist()
            for row, value in zip(column.index, values, strict=True):
                if is_missing(value):
                    raise SourceError(f"{name}: missing text in row {row}")
        else:
            missing = "label" if feature is None or label is not None else None
            values = tag_cells(column, sep) if sep is not None else cells(column, missing)
            if sep is not None and not (label is not None and label.names):
                values = as_indices(values)  # "3 7" names classes 3 and 7 when there are no names
        if feature is None:
            feature = infer_label(name, values)
            self._warn_if_crowded(name, values)
        rows = zip(column.index, values, strict=True)
        return feature, [_checked(feature, value, name, row) for row, value in rows]

    def _warn_if_crowded(self, name: str, values: list[Any]) -> None:
        distinct = crowding(values)
        if distinct is not None:
            warnings.warn(
                f"label_cols: column {name!r} has {distinct} distinct values among {len(values)} "
                f"rows, so it was made a ClassLabel of {distinct}+ classes; if it holds ids, file "
                f"names or numbers rather than classes, declare it: image_cols=[..., {name!r}] "
                "for file paths, or schema= with tfpipe.Tensor / tfpipe.Text (a schema "
                "declaring it tfpipe.ClassLabel keeps it a label and silences this)",
                TfpipeWarning,
                stacklevel=5,
            )

    def _check_duplicates(self, path_col: str) -> np.ndarray | None:
        """Group numbers of rows naming one image file (None when no file repeats).

        Rows of one image must agree on every other column; repeats are warned about once.
        """
        if self.paths is None:
            return None
        keys = [os.path.normpath(os.path.abspath(p)) for p in self.paths]
        _, firsts, groups = np.unique(keys, return_index=True, return_inverse=True)
        repeats = np.flatnonzero(firsts[groups] != np.arange(len(keys)))
        if not len(repeats):
            return None
        columns: dict[str, Any] = {**self.files, **self.values}
        labels = self.schema.of(ClassLabel)
        for row in repeats.tolist():
            first = int(firsts[groups[row]])
            for name, values in columns.items():
                if _key(values[row]) != _key(values[first]):
                    label = labels.get(name)
                    raise SourceError(
                        f"{name}: rows {self.rows[first]} and {self.rows[row]} name the same "
                        f"image {str(self.paths[row])!r} with different "
                        f"{'values' if label is None else 'labels'} "
                        f"({_text(label, values[first])} and "
                        f"{_text(label, values[row])}); fix or remove one of the rows"
                        + (
                            ", or give an image several classes in one row with a list cell "
                            "such as \"['cat', 'dog']\""
                            if label is not None
                            else ""
                        )
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
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = self.check_index(index)
        example: dict[str, Any] = {}
        for name in self.schema:
            example[name] = (
                str(self.files[name][index]) if name in self.files else self.values[name][index]
            )
        return example

    def origin(self, index: int) -> str:
        index = self.check_index(index)
        row = f"row {self.rows[index]}"
        return row if self.paths is None else f"{row} ({self.paths[index]})"

    def groups(self) -> np.ndarray | None:
        return self._groups

    def labels(self) -> np.ndarray | None:
        labels = self.schema.of(ClassLabel)
        for name, values in self.values.items():
            if name in labels and not labels[name].multi_label:
                return np.asarray(values, np.int64)
        return None

    def label_sets(self) -> np.ndarray | None:
        labels = self.schema.of(ClassLabel)
        for name, values in self.values.items():
            if name in labels and labels[name].multi_label:
                return multi_hot(labels[name], values)
        return None

    def columns(self) -> dict[str, np.ndarray] | None:
        columns = dict(self.files)  # file paths, read in the graph
        for name, values in self.values.items():
            feature = self.schema[name]
            columns[name] = feature.stack([feature.load(v) for v in values])
        return columns


def _multi_label(label: ClassLabel | None) -> bool:
    return label is not None and label.multi_label


def _key(value: Any) -> Any:
    """A comparable form of a stored value: a set of classes, array bytes, a normalized path."""
    if isinstance(value, list):
        return frozenset(value)
    if isinstance(value, np.ndarray):
        return value.shape, value.tobytes()
    if isinstance(value, np.str_):
        return os.path.normpath(os.path.abspath(value))
    return value


def _text(label: ClassLabel | None, value: Any) -> str:
    """A value for an error: class name(s) when it is a ClassLabel's with names, else its
    repr."""
    if label is None or label.names is None:
        return repr(value.tolist() if isinstance(value, np.ndarray) else str(value))
    names = label.names
    return repr([names[i] for i in value] if isinstance(value, list) else names[value])


def _checked(feature: Feature, value: Any, column: str, row: Any) -> Any:
    """A cell as the source keeps it (`Feature.keep`), or a SourceError naming it."""
    try:
        return feature.keep(value)
    except (TypeError, ValueError) as e:
        raise SourceError(f"{column}: {e} in row {row}") from e


def from_dataframe(
    df: pd.DataFrame,
    *,
    path_col: str | None = None,
    label_cols: str | Sequence[str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    schema: Schema | None = None,
    image_shape: tuple[int | None, int | None, int] = (None, None, 3),
    image_cols: str | Sequence[str] | None = None,
    label_sep: str | Mapping[str, str] | None = None,
    image_suffix: str | Mapping[str, str] | None = None,
) -> DataFrameSource:
    """A source over a DataFrame: one example per row, one feature per column used.

    Image columns hold file paths (relative to `base_dir`, with `image_suffix` added to names
    without an extension); every file must exist. Label cells may be class indices, class
    names, lists (a real list or a string such as "[1, 0, 3]", parsed safely; a list column
    becomes a multi-label `ClassLabel`), or tag strings split at `label_sep` ("haze primary
    water" gives a multi-hot row over the sorted tag vocabulary; an empty cell has no tags).

    With `schema=`, the schema decides what each column is: a column declared `Image` (or
    another file feature such as a mask) is read as file paths, `ClassLabel`, `Tensor` and
    `Text` columns as values, and every feature of the schema needs its column. Without one,
    label columns are inferred to be `ClassLabel`s; a column of file paths is refused, and
    one with more distinct values than half its rows (of at least 20) gives a warning.

    A table (no schema, no `path_col` or `image_cols`, no column "path" or "image") makes
    every column a feature: numbers a `Tensor` of shape () (int64 when all are integers, else
    float32), strings `Text`, list cells a `Tensor(shape=(None,))`; `label_cols` (default:
    "label" if there is such a column) are its targets, a `ClassLabel` of their names (sorted)
    or ints, or a `Tensor` for floats (regression). An empty cell, or one of another kind
    than most of its column, is an error naming the column and the row.

    Examples:
        >>> df = pd.DataFrame({"image_name": ["train_0", "train_1"],
        ...                    "tags": ["haze primary", "clear primary water"]})
        >>> src = tfpipe.from_dataframe(df, path_col="image_name", label_cols="tags",
        ...                             label_sep=" ", image_suffix=".jpg", base_dir="train-jpg")
        >>> src.schema["tags"].names
        ('clear', 'haze', 'primary', 'water')

    Args:
        df: the DataFrame, one row per example.
        path_col: the column of image paths, read as the feature "image". Defaults to "path"
            (or "image" when there is no column "path" or `schema` declares the feature
            "image"; none when `image_cols` is given, `schema` has no feature "image", or
            without `schema` the DataFrame has no column "path" or "image": a table).
        label_cols: the label (or, by `schema`, tensor and text) columns, each a feature of
            its name; a table's targets. Defaults to the schema's features that are not
            files, or ("label",) (for a table: when it has that column).
        base_dir: the folder relative paths start from. Defaults to None.
        schema: the schema to use instead of inferring one (class name order, image shapes,
            which columns are images, tensors or text). Defaults to None.
        image_shape: the `Image` shape of an inferred schema, which stores each image as it
            came (`encoding="auto"`: JPEG as JPEG, PNG, BMP and GIF as PNG), as
            `from_directory` does. Defaults to (None, None, 3).
        image_cols: several image columns (e.g. ["image", "mask"]), each a feature of its
            name, instead of `path_col`. Defaults to None.
        label_sep: split tag strings at this separator (" " splits at any whitespace) into
            multi-label classes; one string for every label column (with `schema`, for its
            multi-label ones), or a column -> separator dict. Defaults to None.
        image_suffix: text added to every path of the image columns, e.g. ".jpg" for names
            without an extension; one string, or a column -> suffix dict. Defaults to None.
    """
    return DataFrameSource(
        df,
        path_col=path_col,
        label_cols=label_cols,
        base_dir=base_dir,
        schema=schema,
        image_shape=image_shape,
        image_cols=image_cols,
        label_sep=label_sep,
        image_suffix=image_suffix,
    )
