"""tfpipe.spark on `local[2,2]` (2 threads, a task may fail once; one session on 127.0.0.1 for
the module, stopped after it: each session costs a Python worker per thread importing tfpipe
and TensorFlow): the bytes `write_tfrecords` writes, from a DataFrame of Spark's binaryFile
source or a tfpipe source; errors by name and skips listed; `tfpipe write --runner spark` on a
session of its own. When Spark retries tasks: a Python worker killed while it writes a shard,
the retried task writes the shard again, no record twice, and the files are
`write_tfrecords`' own; a task that fails on every attempt: a named error, nothing that looks
complete."""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")

from pyspark import TaskContext, cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import tfpipe
import tfpipe.spark
from tfpipe.cli.parser import main
from tfpipe.errors import EncodeError, SourceError, TfpipeError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo
from tfpipe.sources.synthetic import make_image_folder

# The sources of the retry tests go to the executors by value (this module is not importable
# there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

_LOCAL = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
}


@pytest.fixture(scope="module")
def local_spark() -> Iterator[Any]:
    """The builder of this module's session on `local[2,2]` (spark.task.maxFailures = 2); a
    JVM launched in the module binds to 127.0.0.1, executors run this interpreter, and the
    session is stopped after it."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        env.setenv("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", sys.executable))
        builder = SparkSession.builder.master("local[2,2]").appName("tfpipe-test")
        for key, value in _LOCAL.items():
            builder = builder.config(key, value)
        try:
            yield builder
        finally:
            _stop_active()


@pytest.fixture
def spark(local_spark: Any) -> Any:
    """The module's session (one per module: started by the first test that asks for it)."""
    return local_spark.getOrCreate()


def _stop_active() -> None:
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def _bytes(info: DatasetInfo) -> list[bytes]:
    return [f.read_bytes() for f in info.files]


def _images(spark: Any, folder: Path, schema: tfpipe.Schema) -> Any:
    """The folder's JPEGs as Spark reads them (binaryFile), in from_directory's order: an
    `image` column of bytes, a `label` column of class names, and the file's `path`."""
    files = spark.read.format("binaryFile").load(str(folder / "*" / "*.jpg"))
    return files.orderBy("path").select(
        F.col("content").alias("image"),
        F.element_at(F.split("path", "/"), -2).alias("label"),
        "path",
    )


@pytest.mark.slow
def test_cli_writes_with_spark_on_a_master(local_spark: Any, tmp_path: Path) -> None:
    """`tfpipe write --runner spark --master local[1]`: a session of the command's own on that
    master (first in the module, it launches the JVM the other tests reuse), stopped after.
    One thread: one Python worker of its own importing tfpipe and TensorFlow, not two."""
    _stop_active()  # the command starts its own, on --master
    folder = make_image_folder(tmp_path / "images", num_classes=2, per_class=10, size=(16, 16))
    out = tmp_path / "cli" / "train"
    command = ["write", str(folder), str(out), "--runner", "spark", "--master", "local[1]"]
    assert main([*command, "--shards", "2", "--no-shuffle"]) == 0
    assert SparkSession.getActiveSession() is None
    info = DatasetInfo.load(out)
    local = tfpipe.write_tfrecords(
        tfpipe.from_directory(folder),
        tmp_path / "local" / "train",
        info.schema,  # JPEGs copied, as tfpipe write stores them
        num_shards=2,
        shuffle=False,
        progress=False,
    )
    assert _bytes(info) == _bytes(local)


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_dataframe_of_binary_files_gives_write_tfrecords_bytes(
    spark: Any, tmp_path: Path, shuffle: bool
) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=3, per_class=12, size=(16, 16))
    source = tfpipe.from_directory(folder)  # JPEGs copied as they are
    df = _images(spark, folder, source.schema)
    options: dict[str, Any] = {"num_shards": 4, "shuffle": shuffle, "seed": 5}
    written = tfpipe.spark.write_tfrecords(
        df, tmp_path / "spark" / "train", source.schema, origin_column="path", **options
    )
    local = tfpipe.write_tfrecords(source, tmp_path / "local" / "train", progress=False, **options)
    assert written.num_examples == local.num_examples == 36
    assert written.shards == local.shards  # names, counts, sizes, digests
    assert _bytes(written) == _bytes(local)
    assert (written.shuffled, written.seed) == (local.shuffled, local.seed)
    assert sorted(p.name for p in (tmp_path / "spark").iterdir()) == [
        *(s.file for s in written.shards),
        "train.json",
    ]


@pytest.mark.slow
def test_a_source_of_tensors_gives_write_tfrecords_bytes(spark: Any, tmp_path: Path) -> None:
    schema = tfpipe.Schema(
        {"x": tfpipe.Tensor(shape=(3,), dtype="float32"), "y": tfpipe.ClassLabel(names=["a", "b"])}
    )
    arrays = {"x": np.arange(900, dtype=np.float32).reshape(300, 3), "y": np.arange(300) % 2}
    source = tfpipe.from_arrays(arrays, schema)
    options: dict[str, Any] = {"num_shards": 3, "seed": 2, "compression": "gzip"}
    written = tfpipe.spark.write_tfrecords(source, tmp_path / "spark" / "t", spark=spark, **options)
    local = tfpipe.write_tfrecords(source, tmp_path / "local" / "t", progress=False, **options)
    assert _bytes(written) == _bytes(local)
    assert written.shards == local.shards
    assert tfpipe.verify(tmp_path / "spark" / "t", progress=False).ok


@pytest.mark.slow
@pytest.mark.fault(
    "a corrupt JPEG in a DataFrame written with tfpipe.spark",
    reader="tfpipe.spark.write_tfrecords",
    outcome="EncodeError naming the file (origin_column), no metadata, no shard; with "
    "on_error='skip' listed in the metadata as write_tfrecords lists it (in the written, "
    "shuffled order)",
)
def test_a_corrupt_image_fails_naming_it_or_is_skipped(spark: Any, tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=2, per_class=8, size=(16, 16))
    source = tfpipe.from_directory(folder)
    first, broken = sorted((folder / "circle").iterdir())[1:3]
    for path in (first, broken):
        path.write_bytes(b"not a JPEG")
    df = _images(spark, folder, source.schema)
    prefix = tmp_path / "spark" / "train"
    with pytest.raises(
        EncodeError, match=rf"({first.name}|{broken.name}).*\(writing .* with Spark\)"
    ):
        tfpipe.spark.write_tfrecords(df, prefix, source.schema, origin_column="path")
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []
    # Shuffled with seed 0, example 2 is written first and example 1 15th: the skipped
    # examples are listed in that order, not by index.
    options: dict[str, Any] = {"num_shards": 2, "on_error": "skip"}
    with pytest.warns(TfpipeWarning, match="skipped 2 of 16"):
        written = tfpipe.spark.write_tfrecords(
            df, prefix, source.schema, origin_column="path", **options
        )
    with pytest.warns(TfpipeWarning, match="skipped 2 of 16"):
        local = tfpipe.write_tfrecords(
            source, tmp_path / "local" / "train", progress=False, **options
        )
    assert [s.index for s in written.skipped] == [s.index for s in local.skipped] == [2, 1]
    assert written.skipped[0].origin.endswith(str(broken))
    assert _bytes(written) == _bytes(local)
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        *(s.file for s in written.shards),
        "train.json",
    ]


class _OneGone:
    """Tensors 0..299, but example 170's file went away (`source[170]` raises)."""

    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="int64")})

    def __len__(self) -> int:
        return 300

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index == 170:
            raise FileNotFoundError("example 170's file is gone")
        return {"x": index}


@pytest.mark.slow
@pytest.mark.fault(
    "an example a tfpipe source cannot give, written with tfpipe.spark (each shard read, "
    "encoded and written by one task)",
    reader="tfpipe.spark.write_tfrecords",
    outcome="EncodeError naming the example, no metadata, no shard; with on_error='skip' "
    "listed in the metadata and the bytes of write_tfrecords",
)
def test_a_source_example_that_cannot_be_read_fails_or_is_skipped(
    spark: Any, tmp_path: Path
) -> None:
    prefix = tmp_path / "spark" / "train"
    with pytest.raises(EncodeError, match=r"example 170 .*is gone.*\(writing .* with Spark\)"):
        tfpipe.spark.write_tfrecords(_OneGone(), prefix, spark=spark, num_shards=3)
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []
    options: dict[str, Any] = {"num_shards": 3, "on_error": "skip", "seed": 1}
    with pytest.warns(TfpipeWarning, match="skipped 1 of 300"):
        written = tfpipe.spark.write_tfrecords(_OneGone(), prefix, spark=spark, **options)
    with pytest.warns(TfpipeWarning, match="skipped 1 of 300"):
        local = tfpipe.write_tfrecords(
            _OneGone(), tmp_path / "local" / "train", progress=False, **options
        )
    assert written.skipped == local.skipped and [s.index for s in written.skipped] == [170]
    assert written.shards == local.shards
    assert _bytes(written) == _bytes(local)


@pytest.mark.slow
def test_one_dataframe_of_paths_and_labels_writes_the_same_records_as_from_dataframe(
    spark: Any, tmp_path: Path
) -> None:
    """The column arguments of from_dataframe (path_col, label_cols, no schema: inferred)
    mean the same to tfpipe.spark: the same records, byte for byte."""
    folder = make_image_folder(tmp_path / "images", num_classes=3, per_class=4, size=(16, 16))
    files = sorted(folder.glob("*/*.jpg"))
    pdf = pd.DataFrame({"file": [str(f) for f in files], "kind": [f.parent.name for f in files]})
    columns = {"path_col": "file", "label_cols": ["kind"]}
    options: dict[str, Any] = {"num_shards": 2, "seed": 3}
    local = tfpipe.write_tfrecords(
        tfpipe.from_dataframe(pdf, **columns), tmp_path / "local" / "t", progress=False, **options
    )
    written = tfpipe.spark.write_tfrecords(
        spark.createDataFrame(pdf), tmp_path / "spark" / "t", **columns, **options
    )
    assert written.schema == local.schema and list(written.schema) == ["image", "kind"]
    assert _examples(written) == _examples(local) and len(_examples(local)) == 12
    assert _bytes(written) == _bytes(local)


@pytest.mark.slow
def test_a_table_writes_the_same_records_as_from_dataframe(spark: Any, tmp_path: Path) -> None:
    pdf = pd.DataFrame(
        {
            "width": [1.5, 2.5, 0.5, 4.0],
            "count": [3, 1, 2, 5],
            "note": ["a", "b", "c", "d"],
            "species": ["setosa", "virginica", "setosa", "versicolor"],
        }
    )
    local = tfpipe.write_tfrecords(
        tfpipe.from_dataframe(pdf, label_cols="species"), tmp_path / "l", progress=False
    )
    written = tfpipe.spark.write_tfrecords(
        spark.createDataFrame(pdf), tmp_path / "s", label_cols="species"
    )
    assert written.schema == local.schema
    assert written.schema["species"] == tfpipe.ClassLabel(["setosa", "versicolor", "virginica"])
    assert _examples(written) == _examples(local)


def _examples(info: DatasetInfo) -> list[dict[str, Any]]:
    """The decoded examples of a dataset, in their written order, as plain values."""
    return [
        {k: np.asarray(v).tolist() for k, v in example.items()}
        for example in tfpipe.read_tfrecords(info.files, info.schema)
    ]


def test_a_dataframe_names_the_columns_it_lacks(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1,), (2,)], ["x"])
    schema = tfpipe.Schema({"y": tfpipe.Tensor(shape=(), dtype="int64")})
    with pytest.raises(SourceError, match=r"label_cols: column 'y' is not in the DataFrame; it "):
        tfpipe.spark.write_tfrecords(df, tmp_path / "t", schema)
    with pytest.raises(SourceError, match=r"path_col: column 'file' is not in the DataFrame"):
        tfpipe.spark.write_tfrecords(df, tmp_path / "t", path_col="file")
    with pytest.raises(SourceError, match=r"origin_column: column 'path' is not in the Data"):
        tfpipe.spark.write_tfrecords(df, tmp_path / "t", label_cols="x", origin_column="path")


def test_the_import_hint_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "tfpipe.spark")
    monkeypatch.setattr(tfpipe, "spark", tfpipe.spark)  # put back after the test
    with pytest.raises(ImportError, match=r"pip install 'tfpipe\[spark\]'"):
        importlib.import_module("tfpipe.spark")


_SCHEMA = tfpipe.Schema({"x": tfpipe.Tensor(shape=(4096,), dtype="float32")})
_EXAMPLES = 1200


def _example(index: int) -> dict[str, Any]:
    return {"x": np.full(4096, index, np.float32)}  # 16 KiB: a shard takes a while to write


class _KillsAShardWriter:
    """Tensors; the first executor process that reads one watches its sibling Python workers
    and kills (SIGKILL) the first that holds a temporary shard of `prefix` open, once (the
    `killed` file records its pid): a worker dying mid-write, as an out-of-memory kill."""

    def __init__(self, prefix: Path, killed: Path) -> None:
        self.prefix, self.killed = prefix, killed

    def __len__(self) -> int:
        return _EXAMPLES

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not getattr(sys, "_tfpipe_watching", False):
            sys._tfpipe_watching = True  # type: ignore[attr-defined]
            threading.Thread(target=self._watch, daemon=True).start()
        return _example(index)

    def _watch(self) -> None:
        import psutil

        temporary = f".{self.prefix.name}-"
        while not self.killed.exists():
            for worker in psutil.Process(os.getppid()).children():
                try:
                    files = worker.open_files()
                except psutil.Error:
                    continue
                if any(Path(f.path).name.startswith(temporary) for f in files):
                    self.killed.write_text(str(worker.pid))
                    os.kill(worker.pid, signal.SIGKILL)
                    return
            time.sleep(0.002)


class _AlwaysFails:
    """Tensors, but example 700 raises a RuntimeError (not an error of the data that
    on_error could skip) on every attempt; each attempt's number is added to `attempts`."""

    def __init__(self, attempts: Path) -> None:
        self.attempts = attempts

    def __len__(self) -> int:
        return _EXAMPLES

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index == 700:
            with self.attempts.open("a") as attempts:
                attempts.write(f"{TaskContext.get().attemptNumber()}\n")
            _raise_deep(40)
        return _example(index)


def _raise_deep(depth: int) -> None:
    """Raises 2 x `depth` frames down, through two functions in turn (Python folds a
    function calling itself): a traceback longer than Spark's message is cut to."""
    if depth:
        _through(depth)
    raise RuntimeError("the disk under example 700 is gone")


def _through(depth: int) -> None:
    _raise_deep(depth - 1)


@pytest.mark.slow
@pytest.mark.fault(
    "an executor's Python worker killed (SIGKILL) while it writes a shard, in tfpipe.spark "
    "on local[2,2] (a task may fail once)",
    reader="tfpipe.spark.write_tfrecords",
    outcome="Spark retries the task; the shards and metadata are write_tfrecords' bytes, no "
    "record twice, the killed attempt's temporary file removed",
)
def test_a_retried_shard_task_writes_no_duplicate(spark: Any, tmp_path: Path) -> None:
    prefix, killed = tmp_path / "spark" / "train", tmp_path / "killed"
    source = _KillsAShardWriter(prefix, killed)
    options: dict[str, Any] = {"num_shards": 2, "shuffle": False}
    written = tfpipe.spark.write_tfrecords(source, prefix, _SCHEMA, spark=spark, **options)
    assert killed.exists(), "no worker was killed while it wrote a shard: nothing was retried"
    pixels = np.stack([_example(i)["x"] for i in range(_EXAMPLES)])
    local = tfpipe.write_tfrecords(
        tfpipe.from_arrays({"x": pixels}, _SCHEMA),
        tmp_path / "local" / "train",
        progress=False,
        **options,
    )
    assert written.num_examples == _EXAMPLES
    assert written.shards == local.shards  # names, counts, sizes, digests
    assert _bytes(written) == _bytes(local)
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        *(s.file for s in written.shards),
        "train.json",
    ]


@pytest.mark.slow
@pytest.mark.fault(
    "a tfpipe.spark task that fails on every attempt (the source raises a RuntimeError 80 "
    "frames down), on local[2,2]",
    reader="tfpipe.spark.write_tfrecords",
    outcome="tried twice, then TfpipeError naming the prefix and, first, the RuntimeError "
    "(however long the traceback); no metadata, no shard under its final name",
)
def test_a_task_failing_every_attempt_leaves_nothing_complete(spark: Any, tmp_path: Path) -> None:
    prefix, attempts = tmp_path / "spark" / "train", tmp_path / "attempts"
    expected = (
        rf"writing {re.escape(repr(str(prefix)))} failed: "
        "RuntimeError: the disk under example 700 is gone; "
    )
    with pytest.raises(TfpipeError, match=expected):
        tfpipe.spark.write_tfrecords(
            _AlwaysFails(attempts), prefix, _SCHEMA, spark=spark, num_shards=2
        )
    assert set(attempts.read_text().split()) == {"0", "1"}  # spark.task.maxFailures = 2
    assert not (prefix.parent / "train.json").exists()
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []
