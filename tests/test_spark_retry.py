"""tfpipe.spark when Spark retries tasks: `local[2,2]` (2 threads, a task may fail once), a
session of its own on 127.0.0.1, stopped after the module. A Python worker killed while it
writes a shard: the retried task writes the shard again, no record twice, and the files are
`write_tfrecords`' own. A task that fails on every attempt: a named error, nothing that looks
complete."""

from __future__ import annotations

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
import pytest

pytest.importorskip("pyspark")

from pyspark import TaskContext, cloudpickle
from pyspark.sql import SparkSession

import tfpipe
import tfpipe.spark
from tfpipe.errors import TfpipeError

# The sources below go to the executors by value (this module is not importable there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

_SCHEMA = tfpipe.Schema({"x": tfpipe.Tensor(shape=(4096,), dtype="float32")})
_EXAMPLES = 1200


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors: this interpreter
    session = (
        SparkSession.builder.master("local[2,2]")  # spark.task.maxFailures = 2
        .appName("tfpipe-retry-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


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
            raise RuntimeError("the disk under example 700 is gone")
        return _example(index)


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
    assert [f.read_bytes() for f in written.files] == [f.read_bytes() for f in local.files]
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        *(s.file for s in written.shards),
        "train.json",
    ]


@pytest.mark.slow
@pytest.mark.fault(
    "a tfpipe.spark task that fails on every attempt (the source raises a RuntimeError), "
    "on local[2,2]",
    reader="tfpipe.spark.write_tfrecords",
    outcome="tried twice, then TfpipeError naming the prefix and the RuntimeError; no "
    "metadata, no shard under its final name",
)
def test_a_task_failing_every_attempt_leaves_nothing_complete(spark: Any, tmp_path: Path) -> None:
    prefix, attempts = tmp_path / "spark" / "train", tmp_path / "attempts"
    expected = (
        rf"(?s)writing {re.escape(repr(str(prefix)))} failed: .*"
        "RuntimeError: the disk under example 700 is gone"
    )
    with pytest.raises(TfpipeError, match=expected):
        tfpipe.spark.write_tfrecords(
            _AlwaysFails(attempts), prefix, _SCHEMA, spark=spark, num_shards=2
        )
    assert set(attempts.read_text().split()) == {"0", "1"}  # spark.task.maxFailures = 2
    assert not (prefix.parent / "train.json").exists()
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []
