"""Writing TFRecord datasets of any size with Apache Beam: the files `write_tfrecords` writes,
from as many workers as the runner has (DirectRunner here; Dataflow, Flink or Spark on a
cluster). An optional extra: `pip install 'tfpipe[beam]'`.

    ReadSource(source)     index ranges, reshuffled ──▶ each worker reads its own examples
        │ SourceExample(index, origin, example)
        ▼
    WriteTFRecords(prefix, schema)
        encode (schema.encode, on the workers) ──▶ (key, record); key: a seeded hash
        examples and bytes ──▶ the number of shards (as write_tfrecords plans it)
        shard = key range ──GroupByKey──▶ records sorted by key ──▶ .<shard>.tmp-<token>
        one last step: rename every shard, write <prefix>.json last, remove stale files

Shards are renamed only when every one of them is written, by one last step, so a failed
run leaves hidden temporary files at most: no shard and no metadata that looks complete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tfpipe import _gc

# A worker imports this module first, unpickling its first DoFn: TensorFlow loads here.
with _gc.paused():
    import numpy as np

    from tfpipe import fs
    from tfpipe.errors import EncodeError, SchemaError, SourceError, TfpipeError
    from tfpipe.info import DatasetInfo, ShardInfo, SkippedExample
    from tfpipe.records.writer import (
        _CHUNK,
        WriteOptions,
        _check_prefix,
        _check_source,
        _Encoder,
        _positive_int,
        _ShardWriter,
        _warn_skipped,
        _writer_lock,
        check_not_all_skipped,
        check_num_shards,
        dataset_info,
        plan_shards,
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
}
_SKIPPED = "skipped"
_KEY_SPACE = 2**64
# The main module of a Python SDK worker process (DirectRunner processes, Dataflow, ...).
_SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"

if getattr(sys.modules["__main__"].__spec__, "name", None) == _SDK_WORKER_MAIN:
    _gc.freeze()  # a process that only runs Beam work: see tfpipe._gc


@dataclasses.dataclass(frozen=True)
class SourceExample:
    """One example of a source in a PCollection: `index` (a number unique in the dataset: its
    position in the source), `origin` (what names it in errors, e.g. "cats/017.jpg") and
    `example` (a dict the schema encodes, e.g. {"image": "<path>", "label": 3}).

    Examples:
        >>> SourceExample(17, "cats/017.jpg", {"image": "cats/017.jpg", "label": 0}).index
        17
    """

    index: int
    origin: str
    example: Mapping[str, Any]


class _ReadRange(beam.DoFn):
    """Reads the examples of a range of indices of a source (on a worker)."""

    def __init__(self, source: Any, schema: Schema) -> None:
        super().__init__()
        self.source = source
        self.schema = schema

    def setup(self) -> None:
        self.encoder = _Encoder(self.source, self.schema, skip=False, check_copies=True)

    def process(self, bounds: tuple[int, int]) -> Iterator[SourceExample]:
        for index in range(*bounds):
            yield SourceExample(index, self.encoder.origin_of(index), self.encoder.read(index))


class ReadSource(beam.PTransform):
    """A tfpipe source (folder, DataFrame, arrays) as a PCollection of `SourceExample`s.

    The indices are cut into ranges that the runner spreads over its workers; each worker
    reads its own examples (`source[i]`, with class labels matched to `schema` by name), and
    `WriteTFRecords` encodes them there: images are read where they are encoded. The source
    is pickled once to each worker, so its files must be where the workers run.

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
        self.schema = _check_source(source, schema)
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
    """Elements of a PCollection as a source by their own indices, for `_Encoder`."""

    def __init__(self, elements: Sequence[Any]) -> None:
        self.by_index: dict[int, SourceExample] = {}
        for element in elements:
            example = _as_source_example(element)
            first = self.by_index.setdefault(example.index, example)
            if first is not example:
                raise EncodeError(
                    f"two examples have the index {example.index} ({first.origin!r} and "
                    f"{example.origin!r}): each SourceExample needs an index of its own"
                )

    def __getitem__(self, index: int) -> Mapping[str, Any]:
        return self.by_index[index].example

    def origin(self, index: int) -> str:
        return self.by_index[index].origin


def _as_source_example(element: Any) -> SourceExample:
    if isinstance(element, SourceExample):
        return element
    raise EncodeError(
        "WriteTFRecords writes SourceExample(index, origin, example) elements (what ReadSource "
        f"gives). Received: {type(element).__name__} {str(element)[:80]}"
    )


def shuffle_key(seed: int, index: int, origin: str) -> int:
    """The random place of an example in the written order: a hash of it keyed by `seed`,
    uniform in [0, 2**64), the same on every worker and runner."""
    digest = hashlib.blake2b(
        f"{index}\0{origin}".encode(), digest_size=8, key=int(seed).to_bytes(8, "little")
    )
    return int.from_bytes(digest.digest(), "big")


class _Encode(beam.DoFn):
    """Encodes a batch of examples with the writer's `_Encoder` (on a worker): (key, record)
    pairs, and the skipped examples as a tagged output."""

    def __init__(self, schema: Schema, options: WriteOptions) -> None:
        super().__init__()
        self.schema = schema
        self.options = options
        self.skipped = Metrics.counter("tfpipe", "skipped_examples")
        self.encoded = Metrics.counter("tfpipe", "encoded_examples")

    def process(self, elements: Sequence[Any]) -> Iterator[Any]:
        batch = _Batch(elements)
        encoder = _Encoder(
            batch, self.schema, self.options.on_error == "skip", self.options.check_copies
        )
        indices = list(batch.by_index)
        for index, result in zip(indices, encoder(np.asarray(indices)), strict=True):
            if isinstance(result, SkippedExample):
                self.skipped.inc()
                yield beam.pvalue.TaggedOutput(_SKIPPED, result)
                continue
            self.encoded.inc()
            if self.options.shuffle:
                key = shuffle_key(self.options.seed, index, batch.origin(index))
            else:
                key = index
            yield key, result


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How records are cut into shards: shard = key * num_shards // key_space."""

    num_shards: int
    key_space: int
    num_records: int
    num_skipped: int

    def shard_of(self, key: int) -> int:
        return key * self.num_shards // self.key_space


def _totals(values: Iterable[tuple[int, int, int]]) -> tuple[int, int, int]:
    """Records, bytes and the largest key, over partial totals."""
    records, size, largest = 0, 0, -1
    for count, more, key in values:
        records, size, largest = records + count, size + more, max(largest, key)
    return records, size, largest


def _plan(totals: tuple[int, int, int], skipped: int, options: WriteOptions) -> _Plan:
    records, size, largest = totals
    num_shards = options.num_shards or plan_shards(records, size)
    key_space = _KEY_SPACE if options.shuffle else largest + 1
    return _Plan(max(num_shards, 1), max(key_space, 1), records, skipped)


class _WriteShard(beam.DoFn):
    """Writes one shard's records, sorted by key, under a temporary name (on a worker)."""

    def __init__(self, path: fs.AnyPath, options: WriteOptions) -> None:
        super().__init__()
        self.path = path
        self.options = options

    def process(
        self, shard: tuple[int, Iterable[tuple[int, bytes]]], plan: _Plan
    ) -> Iterator[tuple[int, ShardInfo]]:
        index, keyed = shard
        writer = _ShardWriter(
            self.path, list(range(plan.num_shards + 1)), self.options.compression, unique=True
        )
        records = (record for _, record in sorted(keyed, key=lambda pair: pair[0]))
        yield index, writer.write_whole(index, records)


def _finish(
    written: list[tuple[int, ShardInfo]],
    skipped: list[SkippedExample],
    plan: _Plan,
    path: fs.AnyPath,
    schema: Schema,
    options: WriteOptions,
) -> DatasetInfo:
    """The last step, once every shard is written: renames them in order, writes empty shards
    for empty key ranges, saves the metadata last and removes stale files."""
    total = plan.num_records + plan.num_skipped
    if total == 0:
        raise SourceError(f"WriteTFRecords({str(path)!r}) received no examples to write")
    skipped = sorted(skipped, key=lambda s: s.index)
    check_not_all_skipped(skipped, total)
    writer = _ShardWriter(path, list(range(plan.num_shards + 1)), options.compression, unique=True)
    temporary = dict(written)
    written_examples = sum(entry.num_examples for entry in temporary.values())
    if set(temporary) - set(range(plan.num_shards)) or written_examples != plan.num_records:
        raise TfpipeError(
            f"WriteTFRecords({str(path)!r}): the shards written hold {written_examples} "
            f"examples in shards {sorted(temporary)}, but {plan.num_records} were encoded for "
            f"shards 0..{plan.num_shards - 1}; no metadata was written"
        )
    for shard in range(plan.num_shards):
        entry = temporary.get(shard) or writer.write_whole(shard, [])
        writer.shards.append(_commit_once(writer, shard, entry))
    info = dataset_info(path, schema, writer.shards, skipped, options)
    info.save()
    writer.remove_stale(every_writer=True)
    return info


def _commit_once(writer: _ShardWriter, shard: int, entry: ShardInfo) -> ShardInfo:
    """`writer.commit`, or the shard an earlier attempt of this step renamed already (a runner
    retries a failed step with the same input)."""
    final = writer.final_path(shard)
    renamed = not (writer.directory / entry.file).exists() and final.is_file()
    if renamed and final.stat().st_size == entry.num_bytes:
        return ShardInfo(final.name, entry.num_examples, entry.num_bytes)
    return writer.commit(shard, entry)


class WriteTFRecords(beam.PTransform):
    """Writes a PCollection of `SourceExample`s to TFRecord shards, as `write_tfrecords` does.

    The same shard names and the same metadata file (`<prefix>.json`: counts, per-shard
    examples and bytes, class names, schema, compression, skipped examples), written last,
    after every shard. Examples are encoded by `schema` on the workers. With `shuffle=True`
    each example gets a random key, a hash of it keyed by `seed`; shard k holds the k-th range
    of keys, sorted by key, so the shards in order are one global random order that no
    machine holds in memory (a shard's records are sorted in one worker's memory: ~128 MiB by
    default). It is not the permutation `write_tfrecords` draws for the same seed: the same
    examples in another random order. With `shuffle=False` the order is by index.

    The output is one `DatasetInfo`, once the metadata is saved. Counters "tfpipe" /
    "encoded_examples" and "skipped_examples" count examples in the runner's metrics.

    Examples:
        >>> with beam.Pipeline() as p:
        ...     _ = (p | ReadSource(src) | WriteTFRecords("out/train", src.schema))
        >>> tfpipe.DatasetInfo.load("out/train").num_examples == len(src)
        True

    Args:
        prefix: the dataset path without suffix, e.g. "out/train" or "gs://bucket/train",
            where every worker can write.
        schema: the schema of the records.
        num_shards: the number of shards. Defaults to ~128 MiB per shard (from the examples'
            total size), and never fewer than min(8, number of examples).
        shuffle: write the examples in a random global order. Defaults to True.
        seed: the seed of that order. Defaults to 0.
        compression: None or "gzip" (or "zlib"). Defaults to None.
        on_error: "raise" fails the run at the first example that cannot be encoded, naming
            it; "skip" leaves it out, counts it and lists it in the metadata. Defaults to
            "raise".
        check_copies: decode each JPEG/PNG stored byte for byte once with TensorFlow's
            decoder, so that a corrupt file fails (or is skipped) here. Defaults to True.

    Raises:
        EncodeError: (in the run) an example cannot be encoded, naming it, or every example
            was skipped.
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
        self.path = _check_prefix(prefix)
        if not isinstance(schema, Schema):
            raise SchemaError(f"schema must be a tfpipe.Schema. Received: {type(schema).__name__}")
        self.schema = schema

    def expand(self, examples: Any) -> Any:
        options = self.options
        encoded = (
            examples
            | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=_CHUNK)
            | "Encode"
            >> beam.ParDo(_Encode(self.schema, options)).with_outputs(_SKIPPED, main="records")
        )
        records, skipped = encoded.records, encoded[_SKIPPED]
        totals = (
            records
            | "Sizes" >> beam.Map(lambda pair: (1, len(pair[1]), pair[0]))
            | "Totals" >> beam.CombineGlobally(_totals)
        )
        num_skipped = skipped | "CountSkipped" >> beam.combiners.Count.Globally()
        plan = beam.pvalue.AsSingleton(
            totals | "Plan" >> beam.Map(_plan, beam.pvalue.AsSingleton(num_skipped), options)
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
            >> beam.Map(_finish, beam.pvalue.AsList(skipped), plan, self.path, self.schema, options)
        )


def pipeline_options(
    runner: str = "direct", args: Sequence[str] = (), workers: int | None = None
) -> PipelineOptions:
    """Beam options for `runner` ("direct", "dataflow", "flink", "spark" or a runner's class
    name) and its command-line `args` (e.g. ["--project=p", "--region=r"]). The DirectRunner
    runs `workers` processes (`--direct_num_workers`, `--direct_running_mode` in `args` win).

    Raises:
        ValueError: an unknown runner, or workers that is not a positive int.
    """
    name = RUNNERS.get(runner.lower(), runner)
    if name not in RUNNERS.values():
        raise ValueError(
            f"runner must be one of {sorted(RUNNERS)} (or {sorted(RUNNERS.values())}). "
            f"Received: runner={runner!r}"
        )
    if workers is not None and not _positive_int(workers):
        raise ValueError(f"workers must be a positive int or None. Received: workers={workers!r}")
    options = PipelineOptions(list(args), runner=name)
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
    CPU (`workers`); Dataflow, Flink and Spark take their options in `args`. A local prefix is
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
        runner: "direct", "dataflow", "flink" or "spark" (or "DataflowRunner", ...).
            Defaults to "direct".
        args: Beam pipeline options, e.g. ["--project=p", "--region=us-central1",
            "--temp_location=gs://b/tmp"] for Dataflow. Defaults to none.
        workers: worker processes of the DirectRunner. Defaults to os.cpu_count().

    Returns:
        The `DatasetInfo` saved beside the shards.

    Raises:
        EncodeError: an example cannot be encoded (naming it), or every one was skipped.
        TfpipeError: the pipeline failed otherwise (the runner's error is the cause), or
            another write to the same local prefix is running.
    """
    options = pipeline_options(runner, args, workers)
    schema = _check_source(source, schema)
    path = _check_prefix(prefix)
    write = WriteTFRecords(
        path, schema, num_shards, shuffle, seed, compression, on_error, check_copies
    )
    check_num_shards(write.options, len(source))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _writer_lock(path):
        try:
            with beam.Pipeline(options=options) as pipeline:
                _ = pipeline | "ReadSource" >> ReadSource(source, schema) | "Write" >> write
        except TfpipeError:
            raise
        except Exception as e:
            raise _failure(e, path) from e
    info = DatasetInfo.load(path)
    if info.skipped:
        _warn_skipped(list(info.skipped), info.num_examples + len(info.skipped))
    return info


def _failure(error: Exception, path: fs.AnyPath) -> TfpipeError:
    """A runner's error as tfpipe's: an EncodeError raised on a worker stays one (its message
    naming the example); anything else names the prefix."""
    text = str(error)
    for kind in (EncodeError, SourceError):
        marker = f"{kind.__name__}: "
        if marker in text:
            message = text[text.rindex(marker) + len(marker) :].strip().splitlines()[0]
            return kind(f"{message} (writing {str(path)!r} with Beam)")
    return TfpipeError(f"the Beam pipeline writing {str(path)!r} failed: {text[:2000]}")
