"""The Beam transforms: `ReadSource` (a tfpipe source as a PCollection of `SourceExample`s)
and `WriteTFRecords` (a PCollection of them written as `write_tfrecords` writes)."""

from __future__ import annotations

import os
from typing import Any

import apache_beam as beam

from tfpipe.beam.encode import (
    KEY_SPACE,
    Encode,
    ReadAndEncode,
    ReadRange,
    chunk_of,
    is_fact,
    is_record,
)
from tfpipe.beam.writing import (
    Facts,
    ShardCut,
    WriteShard,
    WriteSourceShard,
    batch_totals,
    by_shard,
    commit,
    cut_ahead,
    cut_shards,
    source_cut,
    sum_totals,
)
from tfpipe.errors import SchemaError
from tfpipe.format.metadata import SkippedExample
from tfpipe.records.writer import WriteOptions, check_prefix, check_source
from tfpipe.schema import Schema

EXAMPLES_PER_RANGE = 256


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
        self.source, self.schema = check_source(source, schema)
        if isinstance(examples_per_range, bool) or not (
            isinstance(examples_per_range, int) and examples_per_range >= 1
        ):
            raise ValueError(
                "examples_per_range must be a positive int. "
                f"Received: examples_per_range={examples_per_range!r}"
            )
        self.examples_per_range = examples_per_range

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "Ranges" >> self._ranges()
            | "Read" >> beam.ParDo(ReadRange(self.source, self.schema))
        )

    def _ranges(self) -> beam.PTransform:
        """The source's index ranges, (start, stop) each, reshuffled over the workers."""
        total, size = len(self.source), self.examples_per_range
        ranges = [(start, min(start + size, total)) for start in range(0, total, size)]
        return beam.Create(ranges, reshuffle=True)


class WriteTFRecords(beam.PTransform):
    """Writes a PCollection of `SourceExample`s to TFRecord shards, as `write_tfrecords` does.

    The same shard names and the same metadata file (`<prefix>.json`: counts, per-shard
    examples and bytes, class names, schema, compression, skipped examples), written last,
    after every shard. Examples are encoded by `schema` on the workers. With `shuffle=True`
    each example gets a random key, a hash of it keyed by `seed`; shard k holds the k-th range
    of keys, sorted by key, so the shards in order are one global random order that no
    machine holds in memory (a shard's records are sorted in one worker's memory: ~128 MiB by
    default). It is not the permutation `write_tfrecords` draws for the same seed: the same
    examples in another random order (`tfpipe.beam.write_tfrecords` writes that permutation).
    With `shuffle=False` the order is by index: shard k of n holds the indices
    [round(k·N/n), round((k+1)·N/n)), N the largest index + 1. With the same `num_shards` these
    are the shards `write_tfrecords` writes (the default count can differ above ~128 MiB: Beam
    measures every record, `write_tfrecords` its first 32); indices with gaps can leave shards
    empty.

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
        >>> sum(1 for _ in tfpipe.read_tfrecords("out/train")) == len(src)
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
            num_shards=num_shards,
            compression=compression,
            shuffle=shuffle,
            seed=seed,
            workers=1,
            on_error=on_error,
            progress=False,
            check_copies=check_copies,
        )
        if self.options.seed >= KEY_SPACE:
            raise ValueError(f"seed must be below 2**64. Received: seed={seed!r}")
        self.path = check_prefix(prefix)
        if not isinstance(schema, Schema):
            raise SchemaError(f"schema must be a tfpipe.Schema. Received: {type(schema).__name__}")
        self.schema = schema
        self.lock = True  # False: the caller holds the prefix's lock for the whole run

    def expand(self, examples: Any) -> Any:
        # Batches grouped by key: BatchElements is what Beam's DaskRunner runs wrong (last
        # batches lost).
        encoded = (
            examples
            | "ByChunk" >> beam.Map(chunk_of)
            | "Batch" >> beam.GroupByKey()
            | "Batches" >> beam.Values()
            | "Encode" >> beam.ParDo(Encode(self.schema, self.options))
        )
        return self._write_encoded(encoded)

    def _write_encoded(self, encoded: Any) -> Any:
        """The steps after encoding: a PCollection of `Records` batches and facts written as
        shards, then the last step (see the class)."""
        options = self.options
        # One output split by filters, and no side input when the cut is known (nor a
        # combine's default, that is one): a multi-output ParDo is what Beam's DaskRunner runs
        # wrong (every output gets every element), and it computes a side input again in
        # each task. Records move in batches, shard by shard: one element per batch.
        records = encoded | "Records" >> beam.Filter(is_record)
        facts = [encoded | "Facts" >> beam.Filter(is_fact)]
        known = cut_ahead(options)
        cut: Any = known
        if known is None:
            measured = self._measure(records, facts[0])
            facts.append(measured)
            cut = beam.pvalue.AsSingleton(measured)
        written = (
            records
            | "ToShards" >> beam.FlatMap(by_shard, cut)
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(WriteShard(self.path, options), cut)
        )
        return self._commit([*facts, written], known)

    def _commit(self, facts: list[Any], known: ShardCut | None) -> Any:
        """The last step, once every fact of the run (`facts`: PCollections) is in: the one
        `DatasetInfo`. `known`: the cut made before the run, else measured in it."""
        return (
            facts
            | "AllFacts" >> beam.Flatten()
            | "Outcome" >> beam.CombineGlobally(Facts()).without_defaults()
            | "Commit" >> beam.Map(commit, known, self.path, self.schema, self.options, self.lock)
        )

    def _measure(self, records: Any, facts: Any) -> Any:
        """The cut from every record's size, in the run (one element)."""
        sizes = records | "Sizes" >> beam.Map(batch_totals)
        skips = (
            facts
            | "Skips" >> beam.Filter(lambda fact: isinstance(fact, SkippedExample))
            | "SkipSizes" >> beam.Map(lambda skip: (0, 1, 0, skip.index))
        )
        return (
            (sizes, skips)
            | "AllSizes" >> beam.Flatten()
            | "Totals" >> beam.CombineGlobally(sum_totals).without_defaults()
            | "CutShards" >> beam.Map(cut_shards, self.options)
        )


class ReadAndWrite(beam.PTransform):
    """`ReadSource(source) | WriteTFRecords(...)` in fewer steps (what
    `tfpipe.beam.write_tfrecords` runs). With `num_shards` given, each shard is one step that
    reads, encodes and writes its examples, those `write_tfrecords` puts there (its seeded
    permutation with shuffle): the same bytes, and no record crosses a shuffle. Else (or
    shuffled above PLANNED_ORDER_LIMIT examples), each range of indices is read and encoded
    in one step, and the records are shuffled by key as `WriteTFRecords` shuffles them.

    Examples:
        >>> with beam.Pipeline() as p:
        ...     _ = p | ReadAndWrite(ReadSource(src), WriteTFRecords("out/train", src.schema))
    """

    def __init__(self, read: ReadSource, write: WriteTFRecords) -> None:
        super().__init__()
        self.read = read
        self.write = write

    def expand(self, pbegin: Any) -> Any:
        read, write = self.read, self.write
        known = source_cut(write.options, len(read.source))
        if known is not None:
            shards = WriteSourceShard(read.source, write.schema, write.path, write.options)
            written = (
                pbegin
                | "Shards" >> beam.Create(known.ranges(), reshuffle=True)
                | "WriteShards" >> beam.ParDo(shards, known)
            )
            return write._commit([written], known)
        encoded = (
            pbegin
            | "Ranges" >> read._ranges()
            | "ReadAndEncode" >> beam.ParDo(ReadAndEncode(read.source, write.schema, write.options))
        )
        return write._write_encoded(encoded)
