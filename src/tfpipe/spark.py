"""Writing TFRecord datasets with Apache Spark: the shards and metadata `write_tfrecords`
writes, encoded on Spark's executors. An optional extra: `pip install 'tfpipe[spark]'`.

    DataFrame rows (zipWithIndex) ──mapPartitions──▶ Encoder (tfpipe's, on the executors)
        ──▶ a Batch per 256 examples: their records, their positions in write_tfrecords'
        order (its seeded permutation) and the examples skipped among them
    [without num_shards: the batches persisted, one pass sums the records' sizes]
    batches ──flatMap──▶ a part per shard ──partitionBy(shard)──▶ one task per shard sorts
        its parts' records by position, writes .<shard>.tmp-<pid>-<random> and returns its
        ShardInfo and the skipped examples its parts carried
    a tfpipe source: one task per shard reads, encodes and writes the examples
        write_tfrecords puts there (the order broadcast): no record crosses a shuffle
    driver (the prefix locked): renames the shards its successful tasks named, in order,
        writes <prefix>.json last, removes the temporary files of failed attempts

Spark's costs are per element and per task, not per byte: a Batch moves 256 records as one
element, and with `num_shards` the whole write is one job (encode, shuffle, write) with no
extra pass for the skipped examples. A source's shards are planned as `write_tfrecords`
plans them (from its first 32 examples) and written in one job. Each task first takes the
worker's imports out of the garbage collector's reach (`gc.freeze`): PySpark's daemon
collects after every task, which cost ~0.2 s of CPU per task with TensorFlow loaded. A
DataFrame shard's task holds that shard's records in memory to sort them (~128 MiB with the
default `num_shards`); a source's shard is written as it is encoded, and its tasks are as
many as the shards (give `num_shards` >= the executors' cores).

A task retried by Spark writes a temporary file of its own (a random token): only the files
the driver receives from the successful attempts are renamed, so no record is written twice.
Images are read where they are encoded: from paths the executors can open, or from bytes in
the DataFrame (e.g. Spark's `binaryFile` source, whose `content` column holds each file).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from tfpipe import fs
from tfpipe.errors import EncodeError, SchemaError, SourceError, TfpipeError
from tfpipe.features import Feature, Tensor, Text
from tfpipe.format.metadata import DatasetInfo, ShardInfo, SkippedExample
from tfpipe.records.encoder import Encoder
from tfpipe.records.write_order import count_shards, shard_bounds, written_order
from tfpipe.records.writer import (
    CHUNK,
    ShardWriter,
    WriteOptions,
    check_not_all_skipped,
    check_num_shards,
    check_prefix,
    check_source,
    dataset_info,
    estimated_shards,
    warn_skipped,
    write_source_shard,
    writer_lock,
)
from tfpipe.schema import Schema
from tfpipe.sources.cells import infer_label
from tfpipe.sources.dataframe import DataFrameColumns, file_image

try:
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F
except ImportError as e:
    raise ImportError(
        "tfpipe.spark needs PySpark. You can install it via `pip install 'tfpipe[spark]'`."
    ) from e

__all__ = ["session", "write_tfrecords"]

# Examples encoded into one element (`_Batch`) that Spark moves and stores.
EXAMPLES_PER_BATCH = 256
# The last line of an executor's traceback that raised one of tfpipe's errors.
_RAISED = re.compile(r"^tfpipe\.errors\.(EncodeError|SourceError): (.*)$", re.MULTILINE)


class _Rows:
    """DataFrame rows by their index, as a source for `Encoder`: each row a dict of the
    schema's columns (binary cells as bytes), named by `origin_column` when given."""

    def __init__(
        self, rows: Iterable[tuple[Any, int]], schema: Schema, origin_column: str | None
    ) -> None:
        self.by_index = {index: row.asDict() for row, index in rows}
        self.features = list(schema.keys())
        self.origin_column = origin_column

    def __len__(self) -> int:
        return len(self.by_index)

    def __getitem__(self, index: int) -> Mapping[str, Any]:
        row = self.by_index[index]
        return {name: _plain(row[name]) for name in self.features}

    def origin(self, index: int) -> str:
        if self.origin_column is None:
            return f"row {index}"
        return str(self.by_index[index][self.origin_column])


def _plain(value: Any) -> Any:
    """A cell as the schema's encoders take it: binary as bytes, arrays as NumPy arrays."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return np.asarray(value)
    return value


class _Batch(NamedTuple):
    """Encoded examples moved as one element: the records, their positions in the written
    order, and the examples skipped among them."""

    positions: np.ndarray
    records: list[bytes]
    skipped: list[SkippedExample]


def _keep_imports_out_of_gc() -> None:
    """Moves this worker's live objects (tfpipe, TensorFlow: imported once per worker) out
    of reach of the garbage collector: PySpark's daemon runs `gc.collect()` after every task
    of a reused worker, ~0.2 s of CPU each with TensorFlow's objects in reach, and ~1 ms
    without. Objects made later are collected as before."""
    gc.freeze()


def _batches(encoder: Encoder, indices: list[int], positions: np.ndarray) -> Iterator[_Batch]:
    """A `_Batch` per EXAMPLES_PER_BATCH indices, encoded CHUNK at a time."""
    for start in range(0, len(indices), EXAMPLES_PER_BATCH):
        batch = np.asarray(indices[start : start + EXAMPLES_PER_BATCH], np.int64)
        results: list[bytes | SkippedExample] = []
        for offset in range(0, len(batch), CHUNK):
            results += encoder(batch[offset : offset + CHUNK])
        kept = np.array([isinstance(result, bytes) for result in results], bool)
        records = [result for result in results if isinstance(result, bytes)]
        skipped = [result for result in results if isinstance(result, SkippedExample)]
        yield _Batch(positions[batch[kept]], records, skipped)


def _encode_rows(
    schema: Schema, options: WriteOptions, origin_column: str | None, positions: Any
) -> Any:
    """The task that encodes a partition of (row, index) pairs."""

    def encode(rows: Iterable[tuple[Any, int]]) -> Iterator[_Batch]:
        _keep_imports_out_of_gc()
        batch = _Rows(rows, schema, origin_column)
        encoder = Encoder(batch, schema, options.on_error == "skip", options.check_copies)
        yield from _batches(encoder, sorted(batch.by_index), positions.value)

    return encode


def _by_shard(bounds: list[int]) -> Any:
    """Splits a batch into a part per shard its positions fall in, keyed by the shard; its
    skipped examples ride with the first part (shard 0's when it has no record)."""

    def split(batch: _Batch) -> Iterator[tuple[int, _Batch]]:
        shards = np.searchsorted(bounds, batch.positions, side="right") - 1
        skipped = batch.skipped
        for shard in np.unique(shards).tolist() or [0]:
            (where,) = np.nonzero(shards == shard)
            part = _Batch(batch.positions[where], [batch.records[i] for i in where], skipped)
            skipped = []
            yield shard, part

    return split


def _write_shards(path: fs.AnyPath, num_shards: int, compression: str | None) -> Any:
    """The task that writes one shard (a partition: its parts of every batch), in the order
    of the positions, under a temporary name of its own attempt; it returns the shard's
    entry and the examples skipped that its parts carried."""

    def write(
        shard: int, parts: Iterator[tuple[int, _Batch]]
    ) -> Iterator[tuple[int, ShardInfo, list[SkippedExample]]]:
        _keep_imports_out_of_gc()
        positions, records, skipped = [np.empty(0, np.int64)], [], []
        for _, part in parts:
            positions.append(part.positions)
            records += part.records
            skipped += part.skipped
        order = np.argsort(np.concatenate(positions), kind="stable")
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = ShardWriter(path, list(range(num_shards + 1)), compression, unique=True)
        yield shard, writer.write_whole(shard, (records[i] for i in order)), skipped

    return write


def _write_source_shards(
    source: Any,
    schema: Schema,
    *,
    options: WriteOptions,
    path: fs.AnyPath,
    bounds: list[int],
    order: Any,
) -> Any:
    """The task that reads, encodes and writes shard k of a source (partition k): positions
    [bounds[k], bounds[k + 1]) of `order` (broadcast), under a temporary name of its own
    attempt; it returns the shard's entry and the examples skipped in it."""
    num_shards = len(bounds) - 1

    def write(
        shard: int, _: Iterator[int]
    ) -> Iterator[tuple[int, ShardInfo, list[SkippedExample]]]:
        _keep_imports_out_of_gc()
        encoder = Encoder(source, schema, options.on_error == "skip", options.check_copies)
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = ShardWriter(path, list(range(num_shards + 1)), options.compression, unique=True)
        indices = order.value[bounds[shard] : bounds[shard + 1]]
        yield shard, *write_source_shard(writer, shard, encoder, indices)

    return write


def _columns(df: Any, read: DataFrameColumns, origin_column: str | None) -> list[Any]:
    """The columns to read, each named after its feature (and `origin_column`)."""
    if origin_column is not None and origin_column not in df.columns:
        raise SourceError(
            f"origin_column: column {origin_column!r} is not in the DataFrame; it has {df.columns}"
        )
    names = [*read.files, *read.values]
    return [
        *(F.col(column).alias(name) for name, column in read.files.items()),
        *read.values,
        *([origin_column] if origin_column and origin_column not in names else []),
    ]


# Spark's simple types (`df.dtypes`) and the feature of a table's column of that type.
_INTEGERS = ("boolean", "tinyint", "smallint", "int", "bigint")
_FLOATS = ("float", "double")


def _typed(name: str, kind: str) -> Feature:
    """The feature of a table's column of Spark type `kind`, as `from_dataframe` infers it."""
    item = kind.removeprefix("array<").removesuffix(">")
    shape: tuple[int | None, ...] = (None,) if item != kind else ()
    if item in _INTEGERS:
        return Tensor(shape=shape, dtype="int64")
    if item in _FLOATS or item.startswith("decimal"):
        return Tensor(shape=shape)
    if kind == "string":
        return Text()
    raise SourceError(
        f"{name}: a table's columns hold numbers, strings or arrays of numbers; declare this "
        f"one in schema= to read it otherwise. Received: a column of type {kind}"
    )


def _inferred_schema(df: Any, read: DataFrameColumns) -> Schema:
    """The schema `from_dataframe` infers for the same columns: an `Image` per file column,
    a `ClassLabel` per label column from its distinct values (one Spark job each), and a
    table's other columns (and float targets) by their Spark type."""
    types = dict(df.dtypes)
    features: dict[str, Feature] = {name: file_image() for name in read.files}
    for name in read.values:
        label = name in read.labels
        if read.table and (not label or types[name] in _FLOATS):
            features[name] = _typed(name, types[name])
        else:
            values = [row[0] for row in df.select(name).distinct().collect()]
            if None in values:
                raise SourceError(
                    f"{name}: missing label in a row; drop or fill the rows "
                    f"(df.dropna(subset=[{name!r}])). Received: null"
                )
            features[name] = infer_label(name, values)
    return Schema(features)


def _positions(order: np.ndarray) -> np.ndarray:
    """Where each index goes in the written order (`written_order`: `write_tfrecords`' own)."""
    positions = np.empty(len(order), np.int64)
    positions[order] = np.arange(len(order))
    return positions


def session(master: str | None = None, app_name: str = "tfpipe write") -> Any:
    """A SparkSession on `master` (e.g. "local[4]", "spark://host:7077", "yarn"): the active
    one when `master` is None, else a new one (stop it with `.stop()`).

    Examples:
        >>> spark = tfpipe.spark.session("local[2]")
        >>> spark.sparkContext.master
        'local[2]'
    """
    builder = SparkSession.builder.appName(app_name)
    if master is None or master.startswith("local"):
        # Local executors run this interpreter, where tfpipe is installed; not the first
        # `python3` on PATH (a virtual environment used without activating it).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (builder.master(master) if master else builder).getOrCreate()


def _failure(error: Exception, path: fs.AnyPath) -> TfpipeError:
    """Spark's error for a failed job as tfpipe's: an EncodeError or SourceError raised on an
    executor stays one (its message naming the example); anything else names the prefix."""
    raised = _RAISED.findall(str(error))
    if raised:
        name, message = raised[-1]
        kind = EncodeError if name == "EncodeError" else SourceError
        return kind(f"{message} (writing {str(path)!r} with Spark)")
    text = str(error)
    # The executor's Python exception is the first unindented line after its traceback,
    # which can come after thousands of characters of Java and Python frames.
    _, _, traceback = text.rpartition("Traceback (most recent call last):")
    cause = next((line for line in traceback.splitlines() if line[:1].strip()), "")
    return TfpipeError(
        f"the Spark job writing {str(path)!r} failed: {cause + '; ' if cause else ''}"
        f"{type(error).__name__}: {text[:2000]}"
    )


def write_tfrecords(
    df_or_source: Any,
    prefix: str | os.PathLike[str],
    schema: Schema | None = None,
    num_shards: int | None = None,
    compression: str | None = None,
    shuffle: bool = True,
    seed: int = 0,
    on_error: str = "raise",
    check_copies: bool = True,
    origin_column: str | None = None,
    spark: Any = None,
    *,
    path_col: str | None = None,
    label_cols: str | Sequence[str] | None = None,
) -> DatasetInfo:
    """Writes a Spark DataFrame or a tfpipe source with Spark: what `tfpipe.write_tfrecords`
    writes, byte for byte (the same shards, order and metadata), encoded on the executors.

    A DataFrame's columns mean what they mean to `tfpipe.from_dataframe`, with the same
    arguments and defaults: `path_col` (image paths the executors can open, or image bytes,
    e.g. `spark.read.format("binaryFile")`'s `content`) is the feature "image", each of
    `label_cols` a feature of its name, and `schema`'s features (when given) are read from
    the columns of their names. Without a schema it is inferred as `from_dataframe` infers
    it: class names or ints of the label columns (one Spark job per column for the distinct
    values), and for a table (no column of image paths) every column by its Spark type, so
    one DataFrame of paths and labels writes the same records on both. Its rows are numbered
    in the DataFrame's order; a source's examples by their index. With `shuffle=True` the
    order is `write_tfrecords`' permutation of `seed`: the driver holds it (8 bytes per
    example) and sends it to the executors. Each shard is written by one task under a
    temporary name of its own and renamed by the driver when every shard is written; the
    metadata is written last, and the prefix is locked for the run, as `write_tfrecords`
    locks it.

    Examples:
        >>> df = spark.read.format("binaryFile").load("images/*/*.jpg")
        >>> df = df.withColumn("label", F.element_at(F.split("path", "/"), -2))
        >>> schema = tfpipe.Schema({"content": tfpipe.Image(shape=(None, None, 3)),
        ...                         "label": tfpipe.ClassLabel(names=["cat", "dog"])})
        >>> info = tfpipe.spark.write_tfrecords(df, "out/train", schema, origin_column="path")
        >>> labels = spark.createDataFrame(pandas_df)  # columns "path" and "label"
        >>> info = tfpipe.spark.write_tfrecords(labels, "out/train", path_col="path",
        ...                                     label_cols=["label"])

    Args:
        df_or_source: a `pyspark.sql.DataFrame`, or anything with `len(source)` and
            `source[i] -> example dict` (e.g. `tfpipe.from_directory(...)`), pickled to the
            executors.
        prefix: the dataset path without suffix, e.g. "out/train" or "gs://bucket/train",
            where every executor can write.
        schema: the schema of the records. Defaults to `source.schema`, or for a DataFrame
            the one `from_dataframe` infers from the same columns.
        num_shards: the number of shards. Defaults to ~128 MiB per shard (a DataFrame's
            from every record's size, a source's as `write_tfrecords` plans it), and never
            fewer than min(8, number of examples).
        compression: None or "gzip" (or "zlib"). Defaults to None.
        shuffle: write the examples in `write_tfrecords`' random order. Defaults to True.
        seed: the seed of that order. Defaults to 0.
        on_error: "raise" fails at the first example that cannot be read or encoded,
            naming it; "skip" leaves it out, lists it in the metadata and warns once.
            Defaults to "raise".
        check_copies: see `tfpipe.write_tfrecords`. Defaults to True.
        origin_column: a DataFrame column that names each row in errors and in the
            metadata's skipped examples (e.g. "path"). Defaults to "row <index>".
        spark: the SparkSession to run a source's job on. Defaults to the active one (or a
            new local one).
        path_col: a DataFrame's column of image paths or bytes, read as the feature "image",
            as `from_dataframe` reads it. Defaults to "path" (or "image" when there is no
            column "path" or `schema` declares "image"; none when `schema` has no "image"
            or, without a schema, for a table).
        label_cols: a DataFrame's label (or, by `schema`, tensor and text) columns, each a
            feature of its name, as `from_dataframe` reads them. Defaults to the schema's
            features that are not files, or ("label",).

    Returns:
        The `DatasetInfo` saved beside the shards.

    Raises:
        EncodeError: an example cannot be read or encoded (naming it), or every one was
            skipped.
        SourceError: a DataFrame without a column named by `path_col`, `label_cols`,
            `schema` or `origin_column`, or whose labels cannot be inferred.
        TfpipeError: the Spark job failed otherwise (Spark's error is the cause), or another
            write to the same local prefix is running.
    """
    options = WriteOptions(
        num_shards=num_shards,
        compression=compression,
        shuffle=shuffle,
        seed=seed,
        workers=1,
        on_error=on_error,
        progress=False,
        check_copies=check_copies,
    )
    path = check_prefix(prefix)
    if isinstance(df_or_source, DataFrame):
        if schema is not None and not isinstance(schema, Schema):
            raise SchemaError(f"schema must be a tfpipe.Schema. Received: {schema!r}")
        read = DataFrameColumns(
            df_or_source.columns,
            path_col=path_col,
            image_cols=None,
            label_cols=label_cols,
            schema=schema,
        )
        columns = _columns(df_or_source, read, origin_column)
        schema = schema or _inferred_schema(df_or_source, read)
        rows = df_or_source.select(*columns).rdd.zipWithIndex()
        total = rows.count()
        if total == 0:
            raise SourceError("the DataFrame has no rows to write")
        spark, source = df_or_source.sparkSession, None
    else:
        source, schema = check_source(df_or_source, schema)
        spark = spark or session()
        total = len(source)
    check_num_shards(options, total)
    job = _SparkWrite(path, schema, options, spark)
    path.parent.mkdir(parents=True, exist_ok=True)
    with writer_lock(path):
        order = written_order(total, options.shuffle, options.seed)
        positions = _positions(order)
        try:
            if source is None:
                written, num_shards = _write_rows(rows, origin_column, positions, job)
            else:
                num_shards = options.num_shards or estimated_shards(source, schema, order)
                written = _write_source(source, order, num_shards, job)
            info = _commit(written, num_shards, positions, job)
        except TfpipeError:
            raise
        except Exception as e:
            raise _failure(e, path) from e
    if info.skipped:
        warn_skipped(list(info.skipped), total)
    return info


_Written = list[tuple[int, ShardInfo, list[SkippedExample]]]


@dataclasses.dataclass(frozen=True)
class _SparkWrite:
    """What the steps of one write on the driver share: the prefix, the schema, the options
    and the Spark session (never sent to the executors)."""

    path: fs.AnyPath
    schema: Schema
    options: WriteOptions
    spark: Any


def _write_source(source: Any, order: np.ndarray, num_shards: int, job: _SparkWrite) -> _Written:
    """Writes a source's shards, each read, encoded and written by one task (so no record
    crosses a shuffle): the positions `write_tfrecords` puts in it, `order` broadcast."""
    broadcast = job.spark.sparkContext.broadcast(order)
    try:
        bounds = shard_bounds(len(order), num_shards)
        write = _write_source_shards(
            source, job.schema, options=job.options, path=job.path, bounds=bounds, order=broadcast
        )
        shards = job.spark.sparkContext.parallelize(range(num_shards), num_shards)
        return shards.mapPartitionsWithIndex(write).collect()
    finally:
        broadcast.destroy()


def _write_rows(
    rows: Any, origin_column: str | None, positions: np.ndarray, job: _SparkWrite
) -> tuple[_Written, int]:
    """Writes a DataFrame's shards: its partitions encoded where they are, each record sent
    to its shard's task (in one job when `num_shards` is given; else the records' sizes are
    measured first). Gives the shards written and how many."""
    total, path, options = len(positions), job.path, job.options
    broadcast = job.spark.sparkContext.broadcast(positions)
    try:
        encoded = rows.mapPartitions(_encode_rows(job.schema, options, origin_column, broadcast))
        if options.num_shards:
            bounds = shard_bounds(total, options.num_shards)
            return _write_job(encoded, path, bounds, options.compression), options.num_shards
        encoded = encoded.persist(StorageLevel.MEMORY_AND_DISK)  # measured, then written
        try:
            num_shards = _planned_shards(encoded, positions)
            bounds = shard_bounds(total, num_shards)
            return _write_job(encoded, path, bounds, options.compression), num_shards
        finally:
            encoded.unpersist()
    finally:
        broadcast.destroy()


def _commit(
    written: _Written, num_shards: int, positions: np.ndarray, job: _SparkWrite
) -> DatasetInfo:
    """Renames the shards written on the executors, saves the metadata and removes stale
    files, here on the driver, once the shards hold every record encoded."""
    total, path, options = len(positions), job.path, job.options
    skipped = _in_order([s for *_, skipped in written for s in skipped], positions)
    shards = {shard: entry for shard, entry, _ in written}
    writer = ShardWriter(path, shard_bounds(total, num_shards), options.compression, unique=True)
    if len(skipped) == total:
        for entry in shards.values():
            (writer.directory / entry.file).unlink(missing_ok=True)
        check_not_all_skipped(skipped, total)
    records = total - len(skipped)
    if (
        sorted(shards) != list(range(num_shards))
        or sum(entry.num_examples for entry in shards.values()) != records
    ):
        raise TfpipeError(
            f"the Spark job writing {str(path)!r} wrote shards {sorted(shards)} holding "
            f"{sum(e.num_examples for e in shards.values())} examples, but {records} were "
            f"encoded for shards 0..{num_shards - 1}; no metadata was written"
        )
    writer.shards += [writer.commit(shard, shards[shard]) for shard in range(num_shards)]
    info = dataset_info(path, job.schema, shards=writer.shards, skipped=skipped, options=options)
    info.save()
    writer.remove_stale(every_writer=True)
    return info


def _write_job(
    encoded: Any, path: fs.AnyPath, bounds: list[int], compression: str | None
) -> list[tuple[int, ShardInfo, list[SkippedExample]]]:
    """Moves each batch's part of every shard to that shard's task, which writes it."""
    num_shards = len(bounds) - 1
    return (
        encoded.flatMap(_by_shard(bounds))
        .partitionBy(num_shards, lambda shard: shard)
        .mapPartitionsWithIndex(_write_shards(path, num_shards, compression))
        .collect()
    )


def _planned_shards(encoded: Any, positions: np.ndarray) -> int:
    """The shards for the bytes of every record (a pass over the batches: only without
    num_shards); fails when every example was skipped, before anything is written."""
    sizes = encoded.map(lambda batch: (sum(map(len, batch.records)), batch.skipped)).collect()
    total = len(positions)
    skipped = _in_order([s for _, batch in sizes for s in batch], positions)
    check_not_all_skipped(skipped, total)
    num_bytes = sum(size for size, _ in sizes)
    return count_shards(total, num_bytes / max(total - len(skipped), 1) * total)


def _in_order(skipped: list[SkippedExample], positions: np.ndarray) -> list[SkippedExample]:
    """Skipped examples in the written order, as `write_tfrecords` lists them."""
    return sorted(skipped, key=lambda example: positions[example.index])
