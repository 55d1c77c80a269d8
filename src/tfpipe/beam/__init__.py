"""Writing TFRecord datasets of any size with Apache Beam: the files `write_tfrecords` writes,
from as many workers as the runner has (DirectRunner here; Dataflow, Flink, Spark or Dask on
a cluster). An optional extra: `pip install 'tfpipe[beam]'` (`'tfpipe[dask]'` for Dask).

    ReadSource(source)     index ranges, reshuffled ──▶ each worker reads its own examples
        │ SourceExample(index, origin, example)
        ▼
    WriteTFRecords(prefix, schema)
        index // 32 ──GroupByKey──▶ batches of examples
        encode (schema.encode, on the workers) ──▶ (key, record) or a skipped example,
            split by filters; key: a seeded hash
        examples and bytes ──▶ the number of shards (as write_tfrecords plans it)
        shard = key range ──GroupByKey──▶ records sorted by key ──▶ .<shard>.tmp-<token>
        indices ──CombinePerKey──▶ any index two examples share
        one last step (locked): rename every shard, write <prefix>.json last, remove stale files

Shards are renamed only when every one of them is written, by one last step, so a failed
run leaves hidden temporary files at most: no shard and no metadata that looks complete.
That step renames a shard whose temporary file is gone (renamed by an earlier attempt of the
step) only if the final file holds the same records (a digest): else another write removed it.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import hashlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tfpipe.beam import collector

# A worker imports this module first, unpickling its first DoFn: TensorFlow loads here.
with collector.paused():
    import numpy as np
    import tensorflow as tf

    from tfpipe import fs
    from tfpipe.errors import EncodeError, SchemaError, SourceError, TfpipeError
    from tfpipe.format.metadata import (
        DatasetInfo,
        ShardInfo,
        SkippedExample,
        metadata_path,
        tf_compression,
    )
    from tfpipe.records.writer import (
        CHUNK,
        Encoder,
        ShardWriter,
        WriteOptions,
        check_not_all_skipped,
        check_num_shards,
        check_prefix,
        check_source,
        dataset_info,
        plan_shards,
        positive_int,
        shard_bounds,
        warn_skipped,
        writer_lock,
    )
    from tfpipe.schema import Schema

    try:
        import apache_beam as beam
        from apache_beam.metrics import Metrics
        from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
    except ImportError as e:
        raise ImportError(
            "tfpipe.beam needs Apache Beam. You can install it via `pip install 'tfpipe[beam]'`."
        ) from e

__all__ = [
    "ReadSource",
    "SourceExample",
    "WriteTFRecords",
    "pipeline_options",
    "shuffle_key",
    "write_tfrecords",
]

EXAMPLES_PER_RANGE = 256
RUNNERS = {
    "direct": "DirectRunner",
    "dataflow": "DataflowRunner",
    "flink": "FlinkRunner",
    "spark": "SparkRunner",
    "dask": "DaskRunner",
}
# Runners Beam knows by their module path only.
_RUNNER_PATHS = {"DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner"}
_SHOWN_REPEATED = 3
_DASK_PARTITIONS = ("--dask_partition_size", "--dask_npartitions")
_KEY_SPACE = 2**64
# The main module of a Python SDK worker process (DirectRunner processes, Dataflow, ...).
_SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"


def _in_sdk_worker() -> bool:
    """Whether this process is a Beam SDK worker (a host may have no __main__ module, or an
    object without `__spec__` there)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == _SDK_WORKER_MAIN


if _in_sdk_worker():
    collector.freeze()  # a process that only runs Beam work: see tfpipe.beam.collector


@dataclasses.dataclass(frozen=True)
class SourceExample:
    """One example of a source in a PCollection: `index` (an int >= 0 unique in the dataset:
    its position in the source), `origin` (what names it in errors, e.g. "cats/017.jpg") and
    `example` (a dict the schema encodes, e.g. {"image": "<path>", "label": 3}). `error` says
    why the source could not give it (then `example` is empty): `WriteTFRecords` raises it, or
    skips the example with `on_error="skip"`.

    Examples:
        >>> SourceExample(17, "cats/017.jpg", {"image": "cats/017.jpg", "label": 0}).index
        17
    """

    index: int
    origin: str
    example: Mapping[str, Any]
    error: str | None = None


class _ReadRange(beam.DoFn):
    """Reads the examples of a range of indices of a source (on a worker)."""

    def __init__(self, source: Any, schema: Schema) -> None:
        super().__init__()
        self.source = source
        self.schema = schema

    def setup(self) -> None:
        self.encoder = Encoder(self.source, self.schema, skip=False, check_copies=True)

    def process(self, bounds: tuple[int, int]) -> Iterator[SourceExample]:
        for index in range(*bounds):
            origin = self.encoder.origin_of(index)
            try:
                example = self.encoder.read(index)
            except EncodeError as e:  # raised or skipped by WriteTFRecords, as on_error says
                yield SourceExample(index, origin, {}, str(e))
                continue
            yield SourceExample(index, origin, example)


class ReadSource(beam.PTransform):
    """A tfpipe source (folder, DataFrame, arrays) as a PCollection of `SourceExample`s.

    The indices are cut into ranges that the runner spreads over its workers; each worker
    reads its own examples (`source[i]`, with class labels matched to `schema` by name), and
    `WriteTFRecords` encodes them there: images are read where they are encoded. The source
    is pickled once to each worker, so its files must be where the workers run. An example
    the source cannot give (`source[i]` raises an OSError, ValueError, TypeError or
    LookupError, or a class index out of range) comes with its `error`, for `WriteTFRecords`
    to raise or skip.

    Examples:
        >>> with beam.Pipeline() as p:
        ...     _ = (p | ReadSource(src) | WriteTFRecords("out/train", src.schema))

    Args:
        source: anything with `len(source)` and `source[i] -> example dict`, e.g.
            `tfpipe.from_directory(...)`; `source.origin(i)`, when present, names examples.
        schema: the schema the examples are written with: class indices of the source are
            matched to its class labels by name. Defaults to `source.schema`.
        examples_per_range: indices per unit of work. Defaults to 256.

    Raises:
        SourceError: the source is empty or not indexable.
        SchemaError: there is no schema, or its class labels cannot be matched by name.
    """

    def __init__(
        self,
        source: Any,
        schema: Schema | None = None,
        examples_per_range: int = EXAMPLES_PER_RANGE,
    ) -> None:
        super().__init__()
        self.schema = check_source(source, schema)
        self.source = source
        if isinstance(examples_per_range, bool) or not (
            isinstance(examples_per_range, int) and examples_per_range >= 1
        ):
            raise ValueError(
                "examples_per_range must be a positive int. "
                f"Received: examples_per_range={examples_per_range!r}"
            )
        self.examples_per_range = examples_per_range

    def expand(self, pbegin: Any) -> Any:
        total, size = len(self.source), self.examples_per_range
        ranges = [(start, min(start + size, total)) for start in range(0, total, size)]
        return (
            pbegin
            | "Ranges" >> beam.Create(ranges, reshuffle=True)  # spread over the workers
            | "Read" >> beam.ParDo(_ReadRange(self.source, self.schema))
        )


class _Batch:
    """Elements of a PCollection as a source by their own indices, for `Encoder`: those it
    can encode (`readable`) and those the source could not give (`unreadable`)."""

    def __init__(self, elements: Sequence[Any]) -> None:
        # Two examples with one index keep one here; the last step fails the run, naming both.
        self.by_index = {e.index: e for e in map(_as_source_example, elements)}
        self.readable = [i for i, example in self.by_index.items() if example.error is None]
        self.unreadable = [e for e in self.by_index.values() if e.error is not None]

    def __getitem__(self, index: int) -> Mapping[str, Any]:
        return self.by_index[index].example

    def origin(self, index: int) -> str:
        return self.by_index[index].origin


def _as_source_example(element: Any) -> SourceExample:
    """The element, checked: a SourceExample whose index is an int >= 0 (a NumPy one becomes
    an int, as the indices' count by key needs)."""
    if not isinstance(element, SourceExample):
        raise EncodeError(
            "WriteTFRecords writes SourceExample(index, origin, example) elements (what "
            f"ReadSource gives). Received: {type(element).__name__} {str(element)[:80]}"
        )
    index = element.index
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
        raise EncodeError(
            "WriteTFRecords needs the index of each SourceExample to be an int >= 0 (its "
            f"position in the dataset). Received: index={index!r} ({type(index).__name__}) "
            f"in {element.origin!r}"
        )
    return element if type(index) is int else dataclasses.replace(element, index=int(index))


def shuffle_key(seed: int, index: int, origin: str) -> int:
    """The random place of an example in the written order: a hash of it keyed by `seed`,
    uniform in [0, 2**64), the same on every worker and runner."""
    digest = hashlib.blake2b(
        f"{index}\0{origin}".encode(), digest_size=8, key=int(seed).to_bytes(8, "little")
    )
    return int.from_bytes(digest.digest(), "big")


class _Encode(beam.DoFn):
    """Encodes a batch of examples with the writer's `Encoder` (on a worker): (key, record)
    pairs and `SkippedExample`s, in one output (`_is_record` tells them apart)."""

    def __init__(self, schema: Schema, options: WriteOptions) -> None:
        super().__init__()
        self.schema = schema
        self.options = options
        self.skipped = Metrics.counter("tfpipe", "skipped_examples")
        self.encoded = Metrics.counter("tfpipe", "encoded_examples")

    def process(self, elements: Sequence[Any]) -> Iterator[Any]:
        batch = _Batch(elements)
        skip = self.options.on_error == "skip"
        for example in batch.unreadable:
            if not skip:
                raise EncodeError(example.error)
            yield self._skip(SkippedExample(example.index, example.origin, str(example.error)))
        encoder = Encoder(batch, self.schema, skip, self.options.check_copies)
        indices = batch.readable
        for index, result in zip(indices, encoder(np.asarray(indices, np.int64)), strict=True):
            if isinstance(result, SkippedExample):
                yield self._skip(result)
                continue
            self.encoded.inc()
            if self.options.shuffle:
                key = shuffle_key(self.options.seed, index, batch.origin(index))
            else:
                key = index
            yield key, result

    def _skip(self, skipped: SkippedExample) -> SkippedExample:
        self.skipped.inc()
        return skipped


def _chunk_of(element: Any) -> tuple[int, SourceExample]:
    """An element keyed by the chunk of CHUNK indices it belongs to: the batches `_Encode`
    encodes (a batch grouped by key, not by a runner's bundle, that some runners cut short)."""
    example = _as_source_example(element)
    return example.index // CHUNK, example


def _is_record(element: Any) -> bool:
    """Whether an output of `_Encode` is a (key, record) pair (else a `SkippedExample`)."""
    return not isinstance(element, SkippedExample)


def _is_skipped(element: Any) -> bool:
    return isinstance(element, SkippedExample)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How records are cut into shards. With shuffle, by their keys (hashes): shard k holds the
    k-th of `num_shards` equal ranges of [0, 2**64). Without, the key is the index and shard k
    holds the indices [bounds[k], bounds[k + 1]): the positions `write_tfrecords` puts there."""

    num_shards: int
    num_records: int
    num_skipped: int
    bounds: tuple[int, ...] | None = None

    def shard_of(self, key: int) -> int:
        if self.bounds is None:
            return key * self.num_shards // _KEY_SPACE
        return bisect.bisect_right(self.bounds, key) - 1


def _totals(values: Iterable[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """Records, skipped examples, bytes and the largest key, over partial totals. Without
    shuffle the key is the index, and `_plan` cuts [0, largest] into shards; with shuffle it
    is a hash (or a skipped example's index), and unused."""
    records, skipped, size, largest = 0, 0, 0, -1
    for more, fewer, more_bytes, index in values:
        records, skipped = records + more, skipped + fewer
        size, largest = size + more_bytes, max(largest, index)
    return records, skipped, size, largest


def _plan(totals: tuple[int, int, int, int], options: WriteOptions) -> _Plan:
    """The shards `write_tfrecords` plans for as many examples (skipped ones too) and bytes."""
    records, skipped, size, largest = totals
    examples = records + skipped
    num_shards = max(
        options.num_shards or plan_shards(examples, size / max(records, 1) * examples), 1
    )
    if options.shuffle:
        return _Plan(num_shards, records, skipped)
    bounds = tuple(shard_bounds(largest + 1, num_shards))
    return _Plan(num_shards, records, skipped, bounds)


@dataclasses.dataclass(frozen=True)
class _Written:
    """A shard written under its temporary name (`entry.file`) and a digest of its records:
    what the last step renames, and how it knows the shard once renamed."""

    shard: int
    entry: ShardInfo
    digest: str


def _hashed(records: Iterable[bytes], digest: Any) -> Iterator[bytes]:
    """The records, each added to `digest` (its length, then its bytes) as it passes."""
    for record in records:
        digest.update(len(record).to_bytes(8, "little"))
        digest.update(record)
        yield record


def _write_shard(writer: ShardWriter, shard: int, records: Iterable[bytes]) -> _Written:
    digest = hashlib.blake2b(digest_size=16)
    entry = writer.write_whole(shard, _hashed(records, digest))
    return _Written(shard, entry, digest.hexdigest())


def _holds(path: fs.AnyPath, written: _Written, compression: str | None) -> bool:
    """Whether the file at `path` holds the records of `written`, the same bytes in order."""
    if not path.is_file() or path.stat().st_size != written.entry.num_bytes:
        return False
    digest = hashlib.blake2b(digest_size=16)
    records = tf.data.TFRecordDataset(str(path), tf_compression(compression))
    try:
        collections.deque(_hashed(records.as_numpy_iterator(), digest), maxlen=0)
    except tf.errors.OpError:  # not a TFRecord file (with this compression)
        return False
    return digest.hexdigest() == written.digest


class _WriteShard(beam.DoFn):
    """Writes one shard's records, sorted by key, under a temporary name (on a worker)."""

    def __init__(self, path: fs.AnyPath, options: WriteOptions) -> None:
        super().__init__()
        self.path = path
        self.options = options

    def process(
        self, shard: tuple[int, Iterable[tuple[int, bytes]]], plan: _Plan
    ) -> Iterator[_Written]:
        index, keyed = shard
        self.path.parent.mkdir(parents=True, exist_ok=True)  # as write_tfrecords makes it
        writer = ShardWriter(
            self.path, list(range(plan.num_shards + 1)), self.options.compression, unique=True
        )
        records = (record for _, record in sorted(keyed, key=lambda pair: pair[0]))
        yield _write_shard(writer, index, records)


_Uses = tuple[int, tuple[str, ...]]


def _index_use(element: Any) -> tuple[int, _Uses]:
    """An element's index, used once, by its origin."""
    example = _as_source_example(element)
    return example.index, (1, (example.origin,))


def _merge_uses(uses: Iterable[_Uses]) -> _Uses:
    """How many examples use an index, and the origins of the first two."""
    count = 0
    origins: tuple[str, ...] = ()
    for more, names in uses:
        count, origins = count + more, (*origins, *names)[:2]
    return count, origins


def _finish(
    written: list[_Written],
    skipped: list[SkippedExample],
    repeated: list[tuple[int, _Uses]],
    plan: _Plan,
    path: fs.AnyPath,
    schema: Schema,
    options: WriteOptions,
    lock: bool = True,
) -> DatasetInfo:
    """The last step, once every shard is written: checks that no two examples share an index
    and that the shards hold every encoded record, then, holding the prefix's lock (when
    `lock`, on a local prefix), renames the shards in order (empty ones are written for empty
    key ranges), saves the metadata last and removes stale files."""
    total = plan.num_records + plan.num_skipped
    if total == 0:
        raise SourceError(f"WriteTFRecords({str(path)!r}) received no examples to write")
    if repeated:
        shown = "; ".join(
            f"index {index} ({count} examples: {', '.join(map(repr, origins))})"
            for index, (count, origins) in repeated
        )
        raise EncodeError(
            f"WriteTFRecords({str(path)!r}): examples share an index: {shown}. Each "
            "SourceExample needs an index of its own; no metadata was written"
        )
    skipped = sorted(skipped, key=lambda s: s.index)
    check_not_all_skipped(skipped, total)
    by_shard = {item.shard: item for item in written}
    written_examples = sum(item.entry.num_examples for item in written)
    if set(by_shard) - set(range(plan.num_shards)) or written_examples != plan.num_records:
        raise TfpipeError(
            f"WriteTFRecords({str(path)!r}): the shards written hold {written_examples} "
            f"examples in shards {sorted(by_shard)}, but {plan.num_records} were encoded for "
            f"shards 0..{plan.num_shards - 1}; no metadata was written"
        )
    with writer_lock(path) if lock else contextlib.nullcontext():
        writer = ShardWriter(
            path, list(range(plan.num_shards + 1)), options.compression, unique=True
        )
        for shard in range(plan.num_shards):
            if shard not in by_shard:
                by_shard[shard] = _write_shard(writer, shard, [])
        writer.shards += _commit(writer, path, by_shard, options.compression)
        info = dataset_info(path, schema, writer.shards, skipped, options)
        info.save()
        writer.remove_stale(every_writer=True)
    return info


def _commit(
    writer: ShardWriter,
    path: fs.AnyPath,
    written: dict[int, _Written],
    compression: str | None,
) -> list[ShardInfo]:
    """Renames every shard, in order, once all are known to be this write's. A shard whose
    temporary file is gone must hold its records under its final name already: an earlier
    attempt of this step renamed it (a runner retries a failed step with the same input).
    Else another write to the prefix removed it, and nothing is renamed. The metadata of an
    earlier write goes before the first rename, even when no shard is left to rename: from
    there on it would describe a mix of its shards and this write's."""
    renamed = {}
    for shard, item in sorted(written.items()):
        final = writer.final_path(shard)
        if (writer.directory / item.entry.file).exists():
            continue
        if not _holds(final, item, compression):
            raise TfpipeError(
                f"WriteTFRecords({str(path)!r}): the temporary file of shard {shard} "
                f"({item.entry.file}) is gone and {final.name} does not hold its records: "
                "another write to this prefix ran meanwhile (a finished write removes the "
                "temporary files it finds). This step renamed nothing and wrote no metadata; "
                "write again, one write to a prefix at a time"
            )
        renamed[shard] = dataclasses.replace(item.entry, file=final.name)
    metadata_path(path).unlink(missing_ok=True)
    return [
        renamed.get(shard) or writer.commit(shard, item.entry)
        for shard, item in sorted(written.items())
    ]


class WriteTFRecords(beam.PTransform):
    """Writes a PCollection of `SourceExample`s to TFRecord shards, as `write_tfrecords` does.

    The same shard names and the same metadata file (`<prefix>.json`: counts, per-shard
    examples and bytes, class names, schema, compression, skipped examples), written last,
    after every shard. Examples are encoded by `schema` on the workers. With `shuffle=True`
    each example gets a random key, a hash of it keyed by `seed`; shard k holds the k-th range
    of keys, sorted by key, so the shards in order are one global random order that no
    machine holds in memory (a shard's records are sorted in one worker's memory: ~128 MiB by
    default). It is not the permutation `write_tfrecords` draws for the same seed: the same
    examples in another random order. With `shuffle=False` the order is by index: shard k of
    n holds the indices [round(k·N/n), round((k+1)·N/n)), N the largest index + 1. With the
    same `num_shards` these are the shards `write_tfrecords` writes (the default count can
    differ above ~128 MiB: Beam measures every record, `write_tfrecords` its first 32); indices
    with gaps can leave shards empty.

    The output is one `DatasetInfo`, once the metadata is saved. Counters "tfpipe" /
    "encoded_examples" and "skipped_examples" count examples in the runner's metrics. Two
    examples with one index fail the run, naming both.

    The last step holds a local prefix's lock (as `write_tfrecords` does) while it renames the
    shards. A write to the prefix that finished meanwhile removed this one's temporary files:
    the step then fails naming the prefix and leaves that write's dataset whole. On URLs
    (`gs://`) there is no lock, and two last steps running at the same moment could mix their
    shards: write a prefix from one run at a time.

    Examples:
        >>> with beam.Pipeline() as p:
        ...     _ = (p | ReadSource(src) | WriteTFRecords("out/train", src.schema))
        >>> from tfpipe.format.metadata import DatasetInfo
        >>> DatasetInfo.load("out/train").num_examples == len(src)
        True

    Args:
        prefix: the dataset path without suffix, e.g. "out/train" or "gs://bucket/train",
            where every worker can write. Its folder is made if missing.
        schema: the schema of the records.
        num_shards: the number of shards. Defaults to ~128 MiB per shard (from the examples'
            total size), and never fewer than min(8, number of examples).
        shuffle: write the examples in a random global order. Defaults to True.
        seed: the seed of that order. Defaults to 0.
        compression: None or "gzip" (or "zlib"). Defaults to None.
        on_error: "raise" fails the run at the first example that cannot be read or encoded,
            naming it; "skip" leaves it out, counts it and lists it in the metadata. Defaults
            to "raise".
        check_copies: decode each JPEG/PNG stored byte for byte once with TensorFlow's
            decoder, so that a corrupt file fails (or is skipped) here. Defaults to True.

    Raises:
        EncodeError: (in the run) an example cannot be read or encoded, naming it, two share
            an index, or every example was skipped.
        TfpipeError: (in the run) another write holds the local prefix, or removed this
            write's temporary files.
    """

    def __init__(
        self,
        prefix: str | os.PathLike[str],
        schema: Schema,
        num_shards: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        compression: str | None = None,
        on_error: str = "raise",
        check_copies: bool = True,
    ) -> None:
        super().__init__()
        self.options = WriteOptions(
            num_shards, compression, shuffle, seed, 1, on_error, False, check_copies
        )
        if self.options.seed >= _KEY_SPACE:
            raise ValueError(f"seed must be below 2**64. Received: seed={seed!r}")
        self.path = check_prefix(prefix)
        if not isinstance(schema, Schema):
            raise SchemaError(f"schema must be a tfpipe.Schema. Received: {type(schema).__name__}")
        self.schema = schema
        self._lock = True  # False: the caller holds the prefix's lock for the whole run

    def expand(self, examples: Any) -> Any:
        options = self.options
        # One output split by filters, and batches grouped by key: a multi-output ParDo and
        # BatchElements (whose last batch of a bundle comes from finish_bundle) are what
        # Beam's DaskRunner runs wrong (every output gets every element; last batches lost).
        encoded = (
            examples
            | "ByChunk" >> beam.Map(_chunk_of)
            | "Batch" >> beam.GroupByKey()
            | "Batches" >> beam.Values()
            | "Encode" >> beam.ParDo(_Encode(self.schema, options))
        )
        records = encoded | "Records" >> beam.Filter(_is_record)
        skipped = encoded | "Skipped" >> beam.Filter(_is_skipped)
        sizes = records | "Sizes" >> beam.Map(lambda pair: (1, 0, len(pair[1]), pair[0]))
        skips = skipped | "SkipSizes" >> beam.Map(lambda skip: (0, 1, 0, skip.index))
        plan = beam.pvalue.AsSingleton(
            (sizes, skips)
            | "AllSizes" >> beam.Flatten()
            | "Totals" >> beam.CombineGlobally(_totals)
            | "Plan" >> beam.Map(_plan, options)
        )
        repeated = (
            examples
            | "Indices" >> beam.Map(_index_use)
            | "CountIndices" >> beam.CombinePerKey(_merge_uses)
            | "Repeated" >> beam.Filter(lambda use: use[1][0] > 1)
            | "FirstRepeated" >> beam.combiners.Top.Smallest(_SHOWN_REPEATED)
        )
        written = (
            records
            | "ToShards" >> beam.Map(lambda pair, plan: (plan.shard_of(pair[0]), pair), plan)
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(_WriteShard(self.path, options), plan)
        )
        return (
            written
            | "AllShards" >> beam.combiners.ToList()
            | "Commit"
            >> beam.Map(
                _finish,
                beam.pvalue.AsList(skipped),
                beam.pvalue.AsSingleton(repeated),
                plan,
                self.path,
                self.schema,
                options,
                self._lock,
            )
        )


def pipeline_options(
    runner: str = "direct", args: Sequence[str] = (), workers: int | None = None
) -> PipelineOptions:
    """Beam options for `runner` ("direct", "dataflow", "flink", "spark", "dask" or a runner's
    class name) and its command-line `args` (e.g. ["--project=p", "--region=r"]). The
    DirectRunner runs `workers` processes (`--direct_num_workers`, `--direct_running_mode` in
    `args` win). The DaskRunner gets one partition per range of `ReadSource`
    (`--dask_partition_size=1`), so that the ranges spread over the cluster's workers, unless
    `args` give `--dask_partition_size` or `--dask_npartitions`; `--dask_client_address`
    names the scheduler (else Dask starts a local cluster).

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
        args = [*args, "--dask_partition_size=1"]
    options = PipelineOptions(list(args), runner=_RUNNER_PATHS.get(name, name))
    if name == "DirectRunner":
        direct = options.view_as(DirectOptions)
        if not any(a.startswith("--direct_num_workers") for a in args):
            direct.direct_num_workers = workers or os.cpu_count() or 1
        if not any(a.startswith("--direct_running_mode") for a in args):
            direct.direct_running_mode = "multi_processing"
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
        num_shards: see `WriteTFRecords`. Defaults to ~128 MiB per shard.
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
        workers: worker processes of the DirectRunner. Defaults to os.cpu_count().

    Returns:
        The `DatasetInfo` saved beside the shards.

    Raises:
        EncodeError: an example cannot be encoded (naming it), or every one was skipped.
        TfpipeError: the pipeline failed otherwise (the runner's error is the cause), or
            another write to the same local prefix is running.
    """
    options = pipeline_options(runner, args, workers)
    schema = check_source(source, schema)
    path = check_prefix(prefix)
    write = WriteTFRecords(
        path, schema, num_shards, shuffle, seed, compression, on_error, check_copies
    )
    write._lock = False  # held here, for the whole run
    check_num_shards(write.options, len(source))
    path.parent.mkdir(parents=True, exist_ok=True)
    with writer_lock(path):
        pipeline = beam.Pipeline(options=options)
        _ = pipeline | "ReadSource" >> ReadSource(source, schema) | "Write" >> write
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
