"""Running a Beam write: pipeline options per runner, `write_tfrecords` (a pipeline run and
waited for), and a runner's error told as tfpipe's."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from tfpipe import fs
from tfpipe.beam.ptransforms import ReadAndWrite, ReadSource, WriteTFRecords
from tfpipe.errors import EncodeError, SourceError, TfpipeError
from tfpipe.format.metadata import DatasetInfo
from tfpipe.records.write_order import written_order
from tfpipe.records.writer import (
    check_num_shards,
    check_prefix,
    check_source,
    estimated_shards,
    positive_int,
    warn_skipped,
    writer_lock,
)
from tfpipe.schema import Schema

RUNNERS = {
    "direct": "DirectRunner",
    "dataflow": "DataflowRunner",
    "flink": "FlinkRunner",
    "spark": "SparkRunner",
    "dask": "DaskRunner",
}
# Runners Beam knows by their module path only.
_RUNNER_PATHS = {"DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner"}
_DASK_PARTITIONS = ("--dask_partition_size", "--dask_npartitions")
DASK_PARTITIONS = 32
"""Partitions of a write on Dask by default: each of its shuffles (grouping examples into
batches, records into shards) runs ~partitions² tasks, whatever the number of examples."""


def pipeline_options(
    runner: str = "direct", args: Sequence[str] = (), workers: int | None = None
) -> PipelineOptions:
    """Beam options for `runner` ("direct", "dataflow", "flink", "spark", "dask" or a runner's
    class name) and its command-line `args` (e.g. ["--project=p", "--region=r"]). The
    DirectRunner runs `workers` processes, or runs in this process for one worker
    (`--direct_num_workers`, `--direct_running_mode` in `args` win): one worker process
    imported TensorFlow and passed every element to and from this process over gRPC (start-up
    12.5 s against 6.5, 387 us per example against 313, on raw 32x32 pixels). The DaskRunner
    cuts the ranges of `ReadSource` into 32 partitions (`--dask_npartitions=32`: enough for
    32 workers, and a few thousand tasks whatever the number of examples), unless `args`
    give `--dask_partition_size` or `--dask_npartitions`; `--dask_client_address` names the
    scheduler (else Dask starts a local cluster).

    Raises:
        ValueError: an unknown runner, or workers that is not a positive int.
    """
    name = RUNNERS.get(runner.lower(), runner)
    if name not in RUNNERS.values():
        raise ValueError(
            f"runner must be one of {sorted(RUNNERS)} (or {sorted(RUNNERS.values())}). "
            f"Received: runner={runner!r}"
        )
    if workers is not None and not positive_int(workers):
        raise ValueError(f"workers must be a positive int or None. Received: workers={workers!r}")
    if name == "DaskRunner" and not any(a.startswith(_DASK_PARTITIONS) for a in args):
        args = [*args, f"--dask_npartitions={DASK_PARTITIONS}"]
    options = PipelineOptions(list(args), runner=_RUNNER_PATHS.get(name, name))
    if name == "DirectRunner":
        direct = options.view_as(DirectOptions)
        if not any(a.startswith("--direct_num_workers") for a in args):
            direct.direct_num_workers = workers or os.cpu_count() or 1
        if not any(a.startswith("--direct_running_mode") for a in args):
            one = direct.direct_num_workers == 1  # a process of its own would only add costs
            direct.direct_running_mode = "in_memory" if one else "multi_processing"
    return options


def write_tfrecords(
    source: Any,
    prefix: str | os.PathLike[str],
    schema: Schema | None = None,
    num_shards: int | None = None,
    compression: str | None = None,
    shuffle: bool = True,
    seed: int = 0,
    on_error: str = "raise",
    check_copies: bool = True,
    runner: str = "direct",
    args: Sequence[str] = (),
    workers: int | None = None,
) -> DatasetInfo:
    """Writes a source with a Beam pipeline (`ReadSource | WriteTFRecords`) and waits for it.

    What `tfpipe.write_tfrecords` does, on Beam workers: the DirectRunner runs one process per
    CPU (`workers`); Dataflow, Flink, Spark and Dask take their options in `args`. A local prefix is
    locked for the run, as `tfpipe.write_tfrecords` locks it.

    Examples:
        >>> src = tfpipe.from_directory("images", image_shape=(128, 128, 3))
        >>> info = tfpipe.beam.write_tfrecords(src, "out/train", workers=2)
        >>> info.num_examples == len(src)
        True

    Args:
        source: see `ReadSource`.
        prefix: see `WriteTFRecords`.
        schema: see `ReadSource`. Defaults to `source.schema`.
        num_shards: see `WriteTFRecords`. Defaults to ~128 MiB per shard, planned as
            `tfpipe.write_tfrecords` plans it (from its first 32 examples, encoded here).
        compression: see `WriteTFRecords`. Defaults to None.
        shuffle: see `WriteTFRecords`. Defaults to True.
        seed: see `WriteTFRecords`. Defaults to 0.
        on_error: see `WriteTFRecords`; skipped examples are warned about once at the end.
            Defaults to "raise".
        check_copies: see `WriteTFRecords`. Defaults to True.
        runner: "direct", "dataflow", "flink", "spark" or "dask" (or "DataflowRunner",
            ...). Defaults to "direct".
        args: Beam pipeline options, e.g. ["--project=p", "--region=us-central1",
            "--temp_location=gs://b/tmp"] for Dataflow, ["--dask_client_address=host:8786"]
            for a Dask cluster (`pip install 'tfpipe[dask]'`). Defaults to none.
        workers: worker processes of the DirectRunner (one runs in this process). Defaults
            to os.cpu_count().

    Returns:
        The `DatasetInfo` saved beside the shards.

    Raises:
        EncodeError: an example cannot be encoded (naming it), or every one was skipped.
        TfpipeError: the pipeline failed otherwise (the runner's error is the cause), or
            another write to the same local prefix is running.
    """
    options = pipeline_options(runner, args, workers)
    source, schema = check_source(source, schema)
    path = check_prefix(prefix)
    num_shards = num_shards or estimated_shards(
        source, schema, written_order(len(source), shuffle, seed)
    )
    write = WriteTFRecords(
        path,
        schema,
        num_shards=num_shards,
        shuffle=shuffle,
        seed=seed,
        compression=compression,
        on_error=on_error,
        check_copies=check_copies,
    )
    write.lock = False  # held here, for the whole run
    check_num_shards(write.options, len(source))
    path.parent.mkdir(parents=True, exist_ok=True)
    with writer_lock(path):
        pipeline = beam.Pipeline(options=options)
        _ = pipeline | "Write" >> ReadAndWrite(ReadSource(source, schema), write)
        try:
            _run(pipeline)
        except TfpipeError:
            raise
        except Exception as e:
            raise _failure(e, path) from e
    info = DatasetInfo.load(path)
    if info.skipped:
        warn_skipped(list(info.skipped), info.num_examples + len(info.skipped))
    return info


def _run(pipeline: Any) -> None:
    """Runs a pipeline and waits for it. The DaskRunner opens a client to the cluster for each
    run and leaves it open: it is closed here, whatever the outcome."""
    result = pipeline.run()
    try:
        result.wait_until_finish()
    finally:
        client = getattr(result, "client", None)
        if client is not None:
            client.close()


def _failure(error: Exception, path: fs.AnyPath) -> TfpipeError:
    """A runner's error as tfpipe's: an EncodeError or SourceError raised on a worker stays one
    (its message naming the example); anything else names the prefix and what was raised."""
    name, message = _raised(error)
    for kind in (EncodeError, SourceError):
        if name == _qualified(kind):
            return kind(f"{message} (writing {str(path)!r} with Beam)")
    return TfpipeError(f"the Beam pipeline writing {str(path)!r} failed: {name}: {message[:2000]}")


def _raised(error: Exception) -> tuple[str, str]:
    """The qualified type name and message of what a worker raised. Worker processes pass it
    on as the text of their traceback: its last exception line ("tfpipe.errors.EncodeError:
    ..."), that names a type as `_qualified` does."""
    text = str(error)
    marker = "Traceback (most recent call last):"
    if marker in text:
        tail = text[text.rindex(marker) + len(marker) :].splitlines()
        raised = next((line for line in tail if line and not line[0].isspace()), "")
        name, _, message = raised.partition(": ")
        if name:
            return name, message
    return _qualified(type(error)), text


def _qualified(kind: type) -> str:
    """A type's name as a traceback shows it: with its module, unless built in or __main__'s
    (so another library's EncodeError is never taken for tfpipe's)."""
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
