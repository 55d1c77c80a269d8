"""Examples on Beam workers: `SourceExample`s read from a source by index ranges, encoded in
batches by the writer's `Encoder`, each keyed by its place in the written order, and moved
on as one element per batch (`Records`)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from tfpipe.errors import EncodeError
from tfpipe.format.metadata import SkippedExample
from tfpipe.records.encoder import Encoder
from tfpipe.records.writer import CHUNK, WriteOptions
from tfpipe.schema import Schema

KEY_SPACE = 2**64
"""Keys of shuffled examples are in [0, KEY_SPACE)."""


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


class ReadRange(beam.DoFn):
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


@dataclasses.dataclass(frozen=True)
class SharedIndex:
    """An index that `count` examples share, and the origins of the first two: what fails the
    run in its last step. A batch holds them all (`chunk_of`: a batch is a range of indices)."""

    index: int
    count: int
    origins: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Encoded:
    """How many records a batch gave (for the last step, that checks the shards hold them)."""

    count: int


class _Batch:
    """Elements of a PCollection as a source by their own indices, for `Encoder`: those it
    can encode (`readable`), those the source could not give (`unreadable`), and the indices
    several share (`shared`: the last of them is encoded; the last step fails the run)."""

    def __init__(self, elements: Sequence[Any]) -> None:
        self.by_index: dict[int, SourceExample] = {}
        origins: dict[int, list[str]] = {}
        for example in map(as_source_example, elements):
            self.by_index[example.index] = example
            origins.setdefault(example.index, []).append(example.origin)
        self.shared = [
            SharedIndex(index, len(names), tuple(names[:2]))
            for index, names in sorted(origins.items())
            if len(names) > 1
        ]
        self.readable = [i for i, example in self.by_index.items() if example.error is None]
        self.unreadable = [e for e in self.by_index.values() if e.error is not None]

    def __getitem__(self, index: int) -> Mapping[str, Any]:
        return self.by_index[index].example

    def origin(self, index: int) -> str:
        return self.by_index[index].origin


def as_source_example(element: Any) -> SourceExample:
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


@dataclasses.dataclass(frozen=True)
class Records:
    """The records of one encoded batch, each with its key (its place in the written order):
    one element for the steps after encoding, whatever the batch's size (a runner's cost is
    per element: ~100 µs each on the DirectRunner)."""

    pairs: list[tuple[int, bytes]]


class BatchEncoding:
    """Encodes batches of indices with the writer's `Encoder` (on a worker): the batch's
    `Records`, `SkippedExample`s and its `Encoded` count (`is_record` tells the records from
    the rest: facts for the last step). Counts examples in the runner's metrics."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.skipped = Metrics.counter("tfpipe", "skipped_examples")
        self.encoded = Metrics.counter("tfpipe", "encoded_examples")

    def __call__(self, encoder: Encoder, indices: Sequence[int] | np.ndarray) -> Iterator[Any]:
        pairs = []
        for index, result in zip(indices, encoder(np.asarray(indices, np.int64)), strict=True):
            if isinstance(result, SkippedExample):
                yield self.skip(result)
            elif self.options.shuffle:
                pairs.append(
                    (shuffle_key(self.options.seed, index, encoder.origin_of(index)), result)
                )
            else:
                pairs.append((index, result))
        self.encoded.inc(len(pairs))
        if pairs:
            yield Records(pairs)
        yield Encoded(len(pairs))

    def skip(self, skipped: SkippedExample) -> SkippedExample:
        self.skipped.inc()
        return skipped

    def encoder(self, source: Any, schema: Schema) -> Encoder:
        """The writer's `Encoder` of `source`, skipping or raising as `on_error` says."""
        options = self.options
        return Encoder(source, schema, options.on_error == "skip", options.check_copies)


class Encode(beam.DoFn):
    """Encodes a batch of `SourceExample`s (on a worker): what `BatchEncoding` gives, and the
    `SharedIndex`es of the batch."""

    def __init__(self, schema: Schema, options: WriteOptions) -> None:
        super().__init__()
        self.schema = schema
        self.encoding = BatchEncoding(options)

    def process(self, elements: Sequence[Any]) -> Iterator[Any]:
        batch = _Batch(elements)
        yield from batch.shared
        skip = self.encoding.options.on_error == "skip"
        for example in batch.unreadable:
            if not skip:
                raise EncodeError(example.error)
            yield self.encoding.skip(
                SkippedExample(example.index, example.origin, str(example.error))
            )
        encoder = Encoder(batch, self.schema, skip, self.encoding.options.check_copies)
        yield from self.encoding(encoder, batch.readable)


class ReadAndEncode(beam.DoFn):
    """Reads and encodes a range of indices of a source in one step (on a worker): what
    `ReadRange` and then `Encode` give, without an element per example between them."""

    def __init__(self, source: Any, schema: Schema, options: WriteOptions) -> None:
        super().__init__()
        self.source = source
        self.schema = schema
        self.encoding = BatchEncoding(options)

    def setup(self) -> None:
        self.encoder = self.encoding.encoder(self.source, self.schema)

    def process(self, bounds: tuple[int, int]) -> Iterator[Any]:
        yield from self.encoding(self.encoder, range(*bounds))


def chunk_of(element: Any) -> tuple[int, SourceExample]:
    """An element keyed by the chunk of CHUNK indices it belongs to: the batches `Encode`
    encodes (a batch grouped by key, not by a runner's bundle, that some runners cut short)."""
    example = as_source_example(element)
    return example.index // CHUNK, example


def is_record(element: Any) -> bool:
    """Whether an output of `Encode` is a batch of `Records` (else a fact for the last step)."""
    return isinstance(element, Records)


def is_fact(element: Any) -> bool:
    return not is_record(element)
