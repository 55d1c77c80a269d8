"""Writing TFRecord datasets of any size with Apache Beam: the files `write_tfrecords` writes,
from as many workers as the runner has (DirectRunner here; Dataflow, Flink, Spark or Dask on
a cluster). An optional extra: `pip install 'tfpipe[beam]'` (`'tfpipe[dask]'` for Dask).

    ReadSource(source)     index ranges, reshuffled ──▶ each worker reads its own examples
        │ SourceExample(index, origin, example)
        ▼
    WriteTFRecords(prefix, schema)
        index // 32 ──GroupByKey──▶ batches of examples
        encode (schema.encode, on the workers) ──▶ a batch of (key, record) pairs, skipped
            examples, split by filters; key: a seeded hash
        examples and bytes ──▶ the number of shards (as write_tfrecords plans it)
        shard = key range ──GroupByKey──▶ records sorted by key ──▶ .<shard>.tmp-<token>
        an index two examples share: found in its batch (a range of indices), fails the run
        one last step (locked): rename every shard, write <prefix>.json last, remove stale files

`tfpipe.beam.write_tfrecords` plans the shards before the run, as `write_tfrecords` plans
them (`ReadAndWrite`): each shard is read, encoded and written by one step, its examples
those of `write_tfrecords`' order (its seeded permutation with shuffle): the same bytes, and
no record crosses a shuffle.

Shards are renamed only when every one of them is written, by one last step, so a failed
run leaves hidden temporary files at most: no shard and no metadata that looks complete.
That step renames a shard whose temporary file is gone (renamed by an earlier attempt of the
step) only if the final file is the one it wrote (its size and CRC-32C): else another write
removed it.

The modules: `encode` (examples read and encoded on the workers), `writing` (the shards
planned, written and renamed), `ptransforms` (`ReadSource`, `WriteTFRecords`) and `runners`
(`pipeline_options`, `write_tfrecords`).
"""

from __future__ import annotations

import sys

from tfpipe.beam import collector

# A worker imports this package first, unpickling its first DoFn: TensorFlow loads here.
with collector.paused():
    try:
        import apache_beam  # noqa: F401  (its absence named here, before any submodule)
    except ImportError as e:
        raise ImportError(
            "tfpipe.beam needs Apache Beam. You can install it via `pip install 'tfpipe[beam]'`."
        ) from e

    from tfpipe.beam.encode import SourceExample, shuffle_key
    from tfpipe.beam.ptransforms import ReadSource, WriteTFRecords
    from tfpipe.beam.runners import pipeline_options, write_tfrecords

__all__ = [
    "ReadSource",
    "SourceExample",
    "WriteTFRecords",
    "pipeline_options",
    "shuffle_key",
    "write_tfrecords",
]

# The main module of a Python SDK worker process (DirectRunner processes, Dataflow, ...).
_SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"


def _in_sdk_worker() -> bool:
    """Whether this process is a Beam SDK worker (a host may have no __main__ module, or an
    object without `__spec__` there)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == _SDK_WORKER_MAIN


if _in_sdk_worker():
    collector.freeze()  # a process that only runs Beam work: see tfpipe.beam.collector
