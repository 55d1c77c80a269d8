"""The shards of a Beam write: how many and which keys each holds (`ShardCut`), each written by
one worker under a temporary name, then the last step that renames them all and saves the
metadata (`finish`)."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np

from tfpipe import fs
from tfpipe.beam.encode import KEY_SPACE, BatchEncoding, Encoded, Records, SharedIndex
from tfpipe.errors import EncodeError, SourceError, TfpipeError
from tfpipe.format.frames import file_crc32c
from tfpipe.format.metadata import DatasetInfo, ShardInfo, SkippedExample
from tfpipe.format.naming import metadata_path
from tfpipe.records.write_order import count_shards, shard_bounds, written_order
from tfpipe.records.writer import (
    ShardWriter,
    WriteOptions,
    check_not_all_skipped,
    dataset_info,
    write_source_shard,
    writer_lock,
)
from tfpipe.schema import Schema

SHOWN_REPEATED = 3
"""Indices that several examples share, named in the error."""


@dataclasses.dataclass(frozen=True)
class ShardCut:
    """How records are cut into shards. With shuffle, by their keys (hashes): shard k holds the
    k-th of `num_shards` equal ranges of [0, 2**64). Without, the key is the index and shard k
    holds the indices [bounds[k], bounds[k + 1]): the positions `write_tfrecords` puts there.
    A source's shards planned before the run (`source_cut`) hold positions [bounds[k],
    bounds[k + 1]) of `written_order`, shuffled or not."""

    num_shards: int
    num_records: int
    num_skipped: int
    bounds: tuple[int, ...] | None = None

    def ranges(self) -> list[tuple[int, tuple[int, int]]]:
        """Each shard with its [bounds[k], bounds[k + 1]) (none without bounds)."""
        return list(enumerate(itertools.pairwise(self.bounds or ())))

    def shard_of(self, key: int) -> int:
        if self.bounds is None:
            return key * self.num_shards // KEY_SPACE
        return bisect.bisect_right(self.bounds, key) - 1


def by_shard(batch: Records, cut: ShardCut) -> Iterator[tuple[int, Records]]:
    """The records of a batch cut by the shard each goes to: one element per shard."""
    shards: dict[int, list[tuple[int, bytes]]] = {}
    for pair in batch.pairs:
        shards.setdefault(cut.shard_of(pair[0]), []).append(pair)
    for shard, pairs in shards.items():
        yield shard, Records(pairs)


def batch_totals(batch: Records) -> tuple[int, int, int, int]:
    """A batch's records, skipped examples (none), bytes and largest key, for `sum_totals`."""
    return (
        len(batch.pairs),
        0,
        sum(len(record) for _, record in batch.pairs),
        max(key for key, _ in batch.pairs),
    )


def sum_totals(values: Iterable[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """Records, skipped examples, bytes and the largest key, over partial totals. Without
    shuffle the key is the index, and `cut_shards` cuts [0, largest] into shards; with shuffle it
    is a hash (or a skipped example's index), and unused."""
    records, skipped, size, largest = 0, 0, 0, -1
    for more, fewer, more_bytes, index in values:
        records, skipped = records + more, skipped + fewer
        size, largest = size + more_bytes, max(largest, index)
    return records, skipped, size, largest


def cut_shards(totals: tuple[int, int, int, int], options: WriteOptions) -> ShardCut:
    """The shards `write_tfrecords` cuts for as many examples (skipped ones too) and bytes."""
    records, skipped, size, largest = totals
    examples = records + skipped
    num_shards = max(
        options.num_shards or count_shards(examples, size / max(records, 1) * examples), 1
    )
    if options.shuffle:
        return ShardCut(num_shards, records, skipped)
    bounds = tuple(shard_bounds(largest + 1, num_shards))
    return ShardCut(num_shards, records, skipped, bounds)


def cut_ahead(options: WriteOptions) -> ShardCut | None:
    """The shards of keyed records, planned before the run when they can be: shuffled, with
    `num_shards` given. Counts are left at 0: the last step counts the examples (`commit`).
    None: the run measures them (without shuffle, the largest index too)."""
    if options.num_shards is None or not options.shuffle:
        return None
    return ShardCut(options.num_shards, 0, 0)


PLANNED_ORDER_LIMIT = 2**26
"""The most examples whose shards a shuffled `source_cut` cuts: each worker holds the
permutation (8 bytes per example). Above, records are shuffled by key through the runner."""


def source_cut(options: WriteOptions, num_indices: int) -> ShardCut | None:
    """The shards of a source's `num_indices` examples, planned before the run so that each
    is read, encoded and written by one step (`WriteSourceShard`): shard k holds positions
    [bounds[k], bounds[k + 1]) of `written_order`, as `write_tfrecords` writes them. None
    without `num_shards`, or shuffled above PLANNED_ORDER_LIMIT examples."""
    if options.num_shards is None or (options.shuffle and num_indices > PLANNED_ORDER_LIMIT):
        return None
    return ShardCut(options.num_shards, 0, 0, tuple(shard_bounds(num_indices, options.num_shards)))


@dataclasses.dataclass(frozen=True)
class WrittenShard:
    """A shard written under its temporary name (`entry.file`, with the file's size and
    CRC-32C): what the last step renames, and how it knows the shard once renamed."""

    shard: int
    entry: ShardInfo


def write_shard(writer: ShardWriter, shard: int, records: Iterable[bytes]) -> WrittenShard:
    """Writes one shard's records under its temporary name."""
    return WrittenShard(shard, writer.write_whole(shard, records))


def _holds(path: fs.AnyPath, written: WrittenShard) -> bool:
    """Whether the file at `path` is the one `written` names: its size and CRC-32C."""
    entry = written.entry
    if not path.is_file() or path.stat().st_size != entry.num_bytes:
        return False
    return file_crc32c(path) == entry.crc32c


class WriteShard(beam.DoFn):
    """Writes one shard's records, sorted by key, under a temporary name (on a worker)."""

    def __init__(self, path: fs.AnyPath, options: WriteOptions) -> None:
        super().__init__()
        self.path = path
        self.options = options

    def process(
        self, shard: tuple[int, Iterable[Records]], cut: ShardCut
    ) -> Iterator[WrittenShard]:
        index, batches = shard
        keyed = [pair for batch in batches for pair in batch.pairs]
        self.path.parent.mkdir(parents=True, exist_ok=True)  # as write_tfrecords makes it
        writer = ShardWriter(
            self.path, list(range(cut.num_shards + 1)), self.options.compression, unique=True
        )
        records = (record for _, record in sorted(keyed, key=_key))
        yield write_shard(writer, index, records)


class WriteSourceShard(beam.DoFn):
    """Reads, encodes and writes one shard of a source (on a worker): positions [start, stop)
    of `written_order` (`source_cut`), the permutation drawn once per worker process. Its
    records need no shuffle. Gives the shard's skipped examples, its `Encoded` count and the
    `WrittenShard`."""

    def __init__(
        self, source: Any, schema: Schema, path: fs.AnyPath, options: WriteOptions
    ) -> None:
        super().__init__()
        self.source = source
        self.schema = schema
        self.path = path
        self.options = options
        self.encoding = BatchEncoding(options)

    def setup(self) -> None:
        self.encoder = self.encoding.encoder(self.source, self.schema)
        self.order = _order(len(self.source), self.options.shuffle, self.options.seed)

    def process(self, shard: tuple[int, tuple[int, int]], cut: ShardCut) -> Iterator[Any]:
        index, (start, stop) = shard
        self.path.parent.mkdir(parents=True, exist_ok=True)  # as write_tfrecords makes it
        writer = ShardWriter(
            self.path, list(range(cut.num_shards + 1)), self.options.compression, unique=True
        )
        entry, skipped = write_source_shard(writer, index, self.encoder, self.order[start:stop])
        self.encoding.encoded.inc(entry.num_examples)
        yield from map(self.encoding.skip, skipped)
        yield Encoded(entry.num_examples)
        yield WrittenShard(index, entry)


@functools.lru_cache(maxsize=1)
def _order(total: int, shuffle: bool, seed: int) -> np.ndarray:
    """`written_order`, once per worker process (read only: shared by its steps)."""
    order = written_order(total, shuffle, seed)
    order.flags.writeable = False
    return order


def _key(pair: tuple[int, bytes]) -> int:
    return pair[0]


_Uses = tuple[int, tuple[str, ...]]


@dataclasses.dataclass
class Outcome:
    """What the last step needs from every task of the run, gathered by `Facts`: the shards
    written, the examples skipped, the indices several examples share, the records encoded and
    (measured in the run) the cut."""

    written: list[WrittenShard] = dataclasses.field(default_factory=list)
    skipped: list[SkippedExample] = dataclasses.field(default_factory=list)
    shared: list[SharedIndex] = dataclasses.field(default_factory=list)
    records: int = 0
    cuts: list[ShardCut] = dataclasses.field(default_factory=list)

    def add(self, fact: Any) -> None:
        if isinstance(fact, Encoded):
            self.records += fact.count
            return
        kinds: dict[type, list[Any]] = {
            WrittenShard: self.written,
            SkippedExample: self.skipped,
            SharedIndex: self.shared,
            ShardCut: self.cuts,
        }
        kinds[type(fact)].append(fact)

    def merge(self, other: Outcome) -> None:
        self.written += other.written
        self.skipped += other.skipped
        self.shared += other.shared
        self.records += other.records
        self.cuts = self.cuts or other.cuts


class Facts(beam.CombineFn):
    """Every fact of the run in one `Outcome`, combined where the facts are (no side input:
    Beam's DaskRunner computes a side input again in each task that reads it)."""

    def create_accumulator(self) -> Outcome:
        return Outcome()

    def add_input(self, outcome: Outcome, fact: Any) -> Outcome:
        outcome.add(fact)
        return outcome

    def merge_accumulators(self, outcomes: Iterable[Outcome]) -> Outcome:
        merged = Outcome()
        for outcome in outcomes:
            merged.merge(outcome)
        return merged

    def extract_output(self, outcome: Outcome) -> Outcome:
        return outcome


def commit(
    outcome: Outcome,
    cut: ShardCut | None,
    path: fs.AnyPath,
    schema: Schema,
    options: WriteOptions,
    lock: bool = True,
) -> DatasetInfo:
    """The last step: `finish`, with the cut made before the run (or measured in it) and the
    examples counted."""
    cut = cut or (outcome.cuts[0] if outcome.cuts else ShardCut(1, 0, 0))
    counted = dataclasses.replace(
        cut, num_records=outcome.records, num_skipped=len(outcome.skipped)
    )
    repeated = [(s.index, (s.count, s.origins)) for s in sorted(outcome.shared, key=_index)]
    return finish(
        outcome.written,
        skipped=outcome.skipped,
        repeated=repeated[:SHOWN_REPEATED],
        cut=counted,
        path=path,
        schema=schema,
        options=options,
        lock=lock,
    )


def _index(shared: SharedIndex) -> int:
    return shared.index


def finish(
    written: list[WrittenShard],
    *,
    skipped: list[SkippedExample],
    repeated: list[tuple[int, _Uses]],
    cut: ShardCut,
    path: fs.AnyPath,
    schema: Schema,
    options: WriteOptions,
    lock: bool = True,
) -> DatasetInfo:
    """The last step, once every shard is written: checks that no two examples share an index
    and that the shards hold every encoded record, then, holding the prefix's lock (when
    `lock`, on a local prefix), renames the shards in order (empty ones are written for empty
    key ranges), saves the metadata last and removes stale files."""
    total = cut.num_records + cut.num_skipped
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
    if set(by_shard) - set(range(cut.num_shards)) or written_examples != cut.num_records:
        raise TfpipeError(
            f"WriteTFRecords({str(path)!r}): the shards written hold {written_examples} "
            f"examples in shards {sorted(by_shard)}, but {cut.num_records} were encoded for "
            f"shards 0..{cut.num_shards - 1}; no metadata was written"
        )
    with writer_lock(path) if lock else contextlib.nullcontext():
        writer = ShardWriter(
            path, list(range(cut.num_shards + 1)), options.compression, unique=True
        )
        for shard in range(cut.num_shards):
            if shard not in by_shard:
                by_shard[shard] = write_shard(writer, shard, [])
        writer.shards += _commit(writer, path, by_shard)
        info = dataset_info(path, schema, shards=writer.shards, skipped=skipped, options=options)
        info.save()
        writer.remove_stale(every_writer=True)
    return info


def _commit(
    writer: ShardWriter,
    path: fs.AnyPath,
    written: dict[int, WrittenShard],
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
        if not _holds(final, item):
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
