"""Writing a source to TFRecord shards: shuffled, encoded in parallel, atomic per shard.

source[i] ──schema.encode()──▶ bytes ──▶ .train-00003-of-00008.tfrecord.tmp-<pid>
(threads, bounded window,                 ──rename──▶ train-00003-of-00008.tfrecord
 one global permutation)                  ... all shards, then train.json (written last)

Local prefixes are locked (`flock`) for the write and renamed atomically. On URLs
(`gs://`, `ram://`, through `tf.io.gfile`) there is no lock, temporary names carry a random
token per writer, and a rename may be a copy then a delete: the metadata, written last, is
what marks the dataset complete (see docs/guides/filesystems.md).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import fcntl
import importlib.metadata
import itertools
import os
import re
import secrets
import statistics
import warnings
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from tqdm import tqdm

from tfpipe import fs
from tfpipe.errors import EncodeError, SchemaError, SourceError, TfpipeError, TfpipeWarning
from tfpipe.format import tfds_folders
from tfpipe.format.compression import check_compression
from tfpipe.format.frames import FrameWriter
from tfpipe.format.metadata import DatasetInfo, ShardInfo, SkippedExample
from tfpipe.format.naming import SHARDS, metadata_path, temporary_name, temporary_regex
from tfpipe.format.resolution import names_paths
from tfpipe.records.encoder import Encoder
from tfpipe.records.resolved import random_access
from tfpipe.records.write_order import count_shards, shard_bounds, shards_for, written_order
from tfpipe.schema import Schema

# Below this median encode time per example of the first chunk (copied JPEG bytes, small
# arrays) the work holds the GIL and threads only contend for it: such writes use one thread,
# unless the chunk's check of copied images (GIL-free) takes at least as long.
PARALLEL_MIN_SECONDS = 250e-6
CHUNK = 32
_CHUNKS_PER_WORKER = 4
_SHOWN_SKIPPED = 3
_ON_ERROR = ("raise", "skip")

T = TypeVar("T")
R = TypeVar("R")


def positive_int(value: Any) -> bool:
    """Whether `value` is an int (Python or numpy, not bool) of at least 1."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and int(value) >= 1


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    """The options of `write_tfrecords`, validated once; see there for their meaning."""

    num_shards: int | None = None
    compression: str | None = None
    shuffle: bool = True
    seed: int = 0
    workers: int | None = None
    on_error: str = "raise"
    progress: bool = True
    check_copies: bool = True

    def __post_init__(self) -> None:
        if self.num_shards is not None and not positive_int(self.num_shards):
            raise ValueError(
                "num_shards must be a positive int or None. "
                f"Received: num_shards={self.num_shards!r}"
            )
        object.__setattr__(self, "compression", check_compression(self.compression))
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int | np.integer)
            or self.seed < 0
        ):
            raise ValueError(f"seed must be an int >= 0. Received: seed={self.seed!r}")
        if self.workers is None:
            object.__setattr__(self, "workers", os.cpu_count() or 1)
        elif not positive_int(self.workers):
            raise ValueError(
                f"workers must be a positive int or None. Received: workers={self.workers!r}"
            )
        if self.on_error not in _ON_ERROR:
            raise ValueError(
                f"on_error must be one of {list(_ON_ERROR)}. Received: on_error={self.on_error!r}"
            )
        if not isinstance(self.check_copies, bool):
            raise TypeError(
                f"check_copies must be True or False. Received: check_copies={self.check_copies!r}"
            )


def _ordered_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int
) -> Generator[R, None, None]:
    """`map(fn, items)` on `workers` threads, in order, with a bounded number in flight."""
    if workers == 1:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="tfpipe-write")
    pending: collections.deque[Future[R]] = collections.deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= workers * _CHUNKS_PER_WORKER:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def estimated_shards(source: Any, schema: Schema, order: np.ndarray) -> int:
    """The shards `write_tfrecords` plans for `source` written in `order`: from the records
    of the first CHUNK examples of the order, encoded here (an example the source cannot give
    is left out). When any other error stops the estimate, the fewest shards: the write
    raises that error again, naming what failed."""
    encoder = Encoder(source, schema, skip=True, check_copies=False)
    try:
        head = encoder(order[:CHUNK])
    except Exception:  # raised again by the write, where it names the dataset
        return count_shards(len(order), 0)
    return shards_for(len(order), head)


def write_source_shard(
    writer: ShardWriter, shard: int, encoder: Encoder, indices: np.ndarray
) -> tuple[ShardInfo, list[SkippedExample]]:
    """Encodes `indices` CHUNK at a time, in their order, and writes their records as `shard`
    under its temporary name as they come (`writer.write_whole`): one shard of a source on a
    worker of `tfpipe.beam` or `tfpipe.spark`. Gives the shard's entry and the examples
    skipped among them."""
    skipped: list[SkippedExample] = []

    def records() -> Iterator[bytes]:
        for start in range(0, len(indices), CHUNK):
            for result in encoder(indices[start : start + CHUNK]):
                if isinstance(result, SkippedExample):
                    skipped.append(result)
                else:
                    yield result

    return writer.write_whole(shard, records()), skipped


class ShardWriter:
    """Writes positions [bounds[k], bounds[k + 1]) of the order to shard k, atomically.

    `tfpipe.beam` writes whole shards instead (`write_whole`, then `commit`), with a random
    token per writer (`unique=True`): its writers run in many processes, on many machines.
    """

    def __init__(
        self, prefix: fs.AnyPath, bounds: list[int], compression: str | None, unique: bool = False
    ) -> None:
        self.directory = prefix.parent
        # A lock keeps other writers out of a local prefix; on URLs a random token does.
        local = isinstance(prefix, Path) and not unique
        self.token = str(os.getpid()) if local else f"{os.getpid()}-{secrets.token_hex(4)}"
        self.name = prefix.name
        self.bounds = bounds
        self.compression = compression
        self.count = len(bounds) - 1
        self.shards: list[ShardInfo] = []
        self.writer: FrameWriter | None = None

    def final_path(self, shard: int) -> fs.AnyPath:
        return self.directory / SHARDS.name(self.name, shard, self.count, self.compression)

    def temporary_path(self, shard: int) -> fs.AnyPath:
        return self.directory / temporary_name(self.final_path(shard).name, self.token)

    def add(self, position: int, record: bytes | None) -> None:
        """Adds the record at `position` of the order (None: a skipped example)."""
        while position >= self.bounds[len(self.shards) + 1]:
            self._finish()
        if record is not None:
            self._writer().write(record)

    def close(self) -> list[ShardInfo]:
        """Finishes every remaining shard (empty ones too) and returns all of them."""
        while len(self.shards) < self.count:
            self._finish()
        return self.shards

    def abort(self) -> None:
        """Removes what this write left: the open temporary shard and finished shards."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        self.temporary_path(len(self.shards)).unlink(missing_ok=True)
        for shard in self.shards:
            (self.directory / shard.file).unlink(missing_ok=True)

    def _writer(self) -> FrameWriter:
        if self.writer is None:
            self.writer = FrameWriter(self.temporary_path(len(self.shards)), self.compression)
        return self.writer

    def _finish(self) -> None:
        shard = len(self.shards)
        writer = self._writer()
        writer.close()
        self.writer = None
        entry = ShardInfo(self.temporary_path(shard).name, writer.num_records, 0, writer.crc32c)
        if shard == 0:
            self._remove_earlier_shards()
        self.shards.append(self.commit(shard, entry))

    def _remove_earlier_shards(self) -> None:
        """Removes the metadata and every shard of earlier writes to this prefix, before the
        first rename: from there on they would no longer form a dataset, but shards left
        beside this write's (the same count: the same names) would, if this write were
        killed, read as one complete dataset of both writes."""
        metadata_path(self.directory / self.name).unlink(missing_ok=True)
        pattern = re.compile(SHARDS.regex(self.name))
        for entry in self.directory.iterdir():
            if pattern.fullmatch(entry.name):
                entry.unlink(missing_ok=True)

    def write_whole(self, shard: int, records: Iterable[bytes]) -> ShardInfo:
        """Writes every record of shard `shard` under its temporary name, named in the result
        (`commit` renames it)."""
        temporary = self.temporary_path(shard)
        with FrameWriter(temporary, self.compression) as writer:
            for record in records:
                writer.write(record)
        return ShardInfo(
            temporary.name, writer.num_records, temporary.stat().st_size, writer.crc32c
        )

    def commit(self, shard: int, temporary: ShardInfo) -> ShardInfo:
        """Renames the temporary file of shard `shard` to its final name; returns its entry."""
        final = self.final_path(shard)
        if shard == 0:
            # The old metadata would describe a mix of old and new shards from here on.
            metadata_path(self.directory / self.name).unlink(missing_ok=True)
        (self.directory / temporary.file).replace(final)  # type: ignore[arg-type]
        return dataclasses.replace(temporary, file=final.name, num_bytes=final.stat().st_size)

    def remove_stale(self, every_writer: bool = False) -> None:
        """Removes shards of earlier writes to this prefix and temporary files of dead writes
        (on URLs, where no lock tells a dead write from a running one, only this write's,
        unless `every_writer`: a finished Beam write removes those of its retried workers)."""
        current = {shard.file for shard in self.shards}
        local = isinstance(self.directory, Path) or every_writer
        token = r"\d+(-[0-9a-f]{8})?" if local else re.escape(self.token)
        shards = SHARDS.regex(self.name)
        pattern = re.compile(f"{shards}|{temporary_regex(shards, token)}")
        for entry in self.directory.iterdir():
            if pattern.fullmatch(entry.name) and entry.name not in current:
                entry.unlink(missing_ok=True)


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


@contextlib.contextmanager
def writer_lock(prefix: fs.AnyPath) -> Iterator[None]:
    """Holds an exclusive `flock` on `<folder>/.<name>.lock` while one write to `prefix` runs.

    A second writer (process or thread) fails at once, naming the pid that holds the lock. The
    kernel releases the lock when its process dies, so a killed writer leaves no stale lock;
    the holder removes the file when it is done (a writer that opened the file before that
    locks the new one instead). On a filesystem without locks, the write goes on unlocked with
    a warning. A URL (`gs://`, through tf.io.gfile) has no lock: see the module docstring.
    """
    if not isinstance(prefix, Path):
        yield
        return
    path = prefix.parent / f".{prefix.name}.lock"
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise _not_writable(prefix, e) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if holder == str(os.getpid()):
                holder += ", this process: another thread"
            raise TfpipeError(
                f"prefix {str(prefix)!r} is being written by another write_tfrecords (pid "
                f"{holder}; lock file {str(path)!r}). Wait for that write to finish, or write "
                "to another prefix"
            ) from None
        except OSError as e:
            os.close(fd)
            warnings.warn(
                f"cannot lock {str(path)!r} ({e}): this filesystem has no file locks, so a "
                "concurrent write to the same prefix would not be detected",
                TfpipeWarning,
                stacklevel=4,
            )
            yield
            return
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder removed the file after we opened it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _not_writable(prefix: fs.AnyPath, error: OSError) -> TfpipeError:
    """The error for a prefix whose folder cannot be created or written in."""
    reason = error.strerror or str(error)
    if isinstance(error, FileExistsError | NotADirectoryError):
        reason += ": a file, not a folder, is in the way"
    return TfpipeError(
        f"prefix {str(prefix)!r}: cannot write in its folder {str(prefix.parent)!r} ({reason}); "
        "pass a prefix in a folder you can write to"
    )


def check_source(source: Any, schema: Schema | None) -> tuple[Any, Schema]:
    """The source to write, and the schema to write it with: a path is resolved as every
    reader resolves it (an image folder, TFRecords: see `tfpipe.records.resolved.random_access`);
    a source without len/getitem is refused."""
    if names_paths(source):  # a list of example dicts is a source as it is
        source = random_access(source)
    if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        raise SourceError(
            "source must support len(source) and source[i] -> example dict "
            f"(e.g. tfpipe.from_directory). Received: {type(source).__name__}"
        )
    if len(source) == 0:
        raise SourceError(f"source is empty: {type(source).__name__} has no examples to write")
    schema = schema if schema is not None else getattr(source, "schema", None)
    if schema is None:
        raise SchemaError(
            f"{type(source).__name__} has no .schema: pass schema=tfpipe.Schema({{...}})"
        )
    if not isinstance(schema, Schema):
        raise SchemaError(f"schema must be a tfpipe.Schema. Received: {type(schema).__name__}")
    return source, schema


def check_prefix(prefix: str | os.PathLike[str]) -> fs.AnyPath:
    """The output prefix as a path, refused (named) when it is not one a write can use."""
    fs.check_paths(prefix, "prefix")
    text = os.fspath(prefix)
    path = fs.path(text, "prefix")
    if not text or text.endswith(("/", os.sep)) or path.is_dir() or path.name in (".", ".."):
        raise ValueError(
            "prefix must name the dataset inside a folder, e.g. 'out/train' (shards "
            f"'out/train-00000-of-00008.tfrecord', metadata 'out/train.json'). Received: {text!r}"
        )
    if path.suffix == ".json" or ".tfrecord" in path.name:
        raise ValueError(
            f"prefix is the dataset name without a suffix, e.g. 'out/train'. Received: {text!r}"
        )
    return path


def warn_skipped(skipped: list[SkippedExample], total: int) -> None:
    """Warns that `skipped` examples of `total` were left out, naming the first few."""
    shown = "; ".join(f"{s.origin}: {s.error}" for s in skipped[:_SHOWN_SKIPPED])
    more = f" (and {len(skipped) - _SHOWN_SKIPPED} more)" if len(skipped) > _SHOWN_SKIPPED else ""
    warnings.warn(
        f"write_tfrecords skipped {len(skipped)} of {total} examples that could not be encoded: "
        f"{shown}{more}. They are listed in DatasetInfo.skipped.",
        TfpipeWarning,
        stacklevel=3,
    )


def check_num_shards(options: WriteOptions, num_examples: int) -> None:
    """Refuses more shards than examples (some shards would be empty)."""
    if options.num_shards is not None and options.num_shards > num_examples:
        raise ValueError(
            f"num_shards={options.num_shards} is more than the {num_examples} examples of the "
            "source"
        )


def write_tfrecords(
    source: Any,
    prefix: str | os.PathLike[str],
    schema: Schema | None = None,
    num_shards: int | None = None,
    compression: str | None = None,
    shuffle: bool = True,
    seed: int = 0,
    workers: int | None = None,
    on_error: str = "raise",
    progress: bool = True,
    check_copies: bool = True,
    tfds_compatible: bool = False,
) -> DatasetInfo:
    """Writes every example of a source to TFRecord shards and a metadata file.

    Shards are named `<prefix>-00000-of-00008.tfrecord` (`.tfrecord.gz` with gzip); the
    metadata `<prefix>.json` (schema, counts, shard sizes and CRC-32C digests, class names) is
    written last. Each shard is written under a temporary name and renamed when complete, so
    an interrupted write never leaves a shard or metadata that looks complete. The metadata and
    shards of an earlier write to the same prefix are removed before the first shard is
    renamed (from there on they are no longer a dataset), the temporary files of dead writes
    after success. One write at a time holds a prefix (an exclusive lock on the hidden file
    `<prefix folder>/.<name>.lock`, released by the kernel if the writer dies): a second one
    fails at once.

    With `shuffle=True` the examples are written in one global random permutation (shards are
    contiguous slices of it), so even a class-sorted folder comes out mixed; memory stays
    bounded by a small window of in-flight examples, whatever the dataset size. The output is
    the same for the same seed, whatever the number of workers.

    Examples:
        >>> src = tfpipe.from_directory("images", image_shape=(64, 64, 3))
        >>> info = tfpipe.write_tfrecords(src, "out/resized", num_shards=3, progress=False)
        >>> info.num_examples == len(src), [shard.num_examples for shard in info.shards]
        (True, [8, 8, 8])

    Args:
        source: anything with `len(source)` and `source[i] -> example dict`; `source.origin(i)`,
            when present, names the input in errors. Or a path, read as every reader reads
            it: a folder of class folders of images, TFRecords (rewritten).
        prefix: the dataset path without suffix, e.g. "out/train"; folders are created. A
            URL TensorFlow opens ("gs://bucket/train", "ram://train") is written through
            `tf.io.gfile`, without the lock: see the filesystems guide.
        schema: the schema of the records. Class labels of the source are matched to its
            `ClassLabel`s by name (another order, or more classes, is fine). Defaults to
            `source.schema`.
        num_shards: the number of shards. Defaults to ~128 MiB per shard (estimated by encoding
            the first examples), and never fewer than min(8, number of examples).
        compression: None or "gzip" (or "zlib"). Defaults to None.
        shuffle: write the examples in a random global order. Defaults to True.
        seed: the seed of that order. Defaults to 0.
        workers: threads that read and encode examples (Pillow releases the GIL while it
            decodes, resizes and encodes, and TensorFlow while it checks copied JPEGs/PNGs).
            When the first examples encode in under 250 µs (median) (JPEGs copied as they are,
            small arrays) and their image check takes less time than the encode, threads would only
            contend for the GIL and the write runs on one thread. Defaults to os.cpu_count().
        on_error: "raise" stops at the first example that cannot be read or encoded; "skip"
            leaves it out, records it in `DatasetInfo.skipped` and warns once at the end.
            Defaults to "raise".
        progress: show a progress bar (examples/s). Defaults to True.
        check_copies: decode each JPEG/PNG stored byte for byte once with TensorFlow's decoder
            (and each JPEG strictly, refusing libjpeg's "corrupt data" warnings that TensorFlow
            decodes past to noise), so a corrupt file fails here, named, rather than in
            training. It is most of the
            cost of a copying write (~0.2x the speed of copying bytes alone); pass False only
            for images checked already (e.g. by `tfpipe verify` of the records they come from).
            Unchecked, a corrupt image fails when it is decoded, named by `tfpipe.fit` and
            `tfpipe.named_errors`. Defaults to True.
        tfds_compatible: also write what `tfds.builder_from_directory(<prefix folder>)` reads
            (`dataset_info.json`, `features.json`, `<label>.labels.txt`), with the prefix's
            name as the split ("out/train" -> split "train"; write "out/test" the same way to
            add a split; all splits need the same schema). The folder then reads as a TFDS
            folder in tfpipe too: name a split. Needs compression=None (TFDS reads
            uncompressed TFRecords). Defaults to False.

    Returns:
        The `DatasetInfo` that was saved beside the shards.

    Raises:
        EncodeError: an example cannot be read or encoded (naming it and the reason), or every
            example was skipped.
        SourceError: the source is empty or not indexable.
        SchemaError: there is no schema, or its class labels cannot be matched by name to the
            source's (listing both); with `tfds_compatible`, the folder's `features.json`
            describes other features, or its `dataset_info.json` is another tool's (refused
            before anything is written).
        ValueError: the prefix is named "dataset_info" or "features" and written with
            `tfds_compatible` or into a TFDS folder (its metadata would replace TFDS's).
        TfpipeError: another write to the same local prefix is running (naming its pid), or
            the prefix's folder cannot be created or written in (a file in the way, no
            permission, a read-only filesystem), naming it.
        DataNotFoundError: `prefix` is a URL whose scheme TensorFlow cannot open.
    """
    options = WriteOptions(
        num_shards=num_shards,
        compression=compression,
        shuffle=shuffle,
        seed=seed,
        workers=workers,
        on_error=on_error,
        progress=progress,
        check_copies=check_copies,
    )
    source, schema = check_source(source, schema)
    path = check_prefix(prefix)
    if tfds_compatible:
        tfds_folders.check_writable(path.parent, path.name, schema, options.compression)
    else:
        tfds_folders.check_metadata_name(path.parent, path.name, tfds_compatible=False)
    check_num_shards(options, len(source))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _not_writable(path, e) from e
    with writer_lock(path):
        info = _write(source, path, schema, options)
        if tfds_compatible:
            payload = info.num_bytes - tfds_folders.FRAME_OVERHEAD * info.num_examples
            lengths = [shard.num_examples for shard in info.shards]
            tfds_folders.save(
                path.parent, path.name, schema=schema, shard_lengths=lengths, num_bytes=payload
            )
    if info.skipped:
        warn_skipped(list(info.skipped), len(source))
    return info


def _write(source: Any, path: fs.AnyPath, schema: Schema, options: WriteOptions) -> DatasetInfo:
    """The write itself, while this process holds the prefix's lock."""
    total = len(source)
    order = written_order(total, options.shuffle, options.seed)
    encoder = Encoder(source, schema, options.on_error == "skip", options.check_copies)
    chunks = (order[start : start + CHUNK] for start in range(0, total, CHUNK))
    head, seconds, check = encoder.timed(next(chunks))
    encode = statistics.median(seconds)
    # Threads pay off when they run GIL-free work side by side: slow encodes (Pillow's), or an
    # image check (TensorFlow's) that takes as long as the encode it overlaps with.
    workers = options.workers if encode >= PARALLEL_MIN_SECONDS or check >= encode else 1
    results = _ordered_map(encoder, chunks, workers)  # type: ignore[arg-type]
    num_shards = options.num_shards or shards_for(total, head)
    shards = ShardWriter(path, shard_bounds(total, num_shards), options.compression)
    skipped: list[SkippedExample] = []
    bar = tqdm(total=total, unit="ex", desc=f"writing {path.name}", disable=not options.progress)
    try:
        position = 0
        for chunk in itertools.chain([head], results):
            for result in chunk:
                if isinstance(result, SkippedExample):
                    skipped.append(result)
                    shards.add(position, None)
                else:
                    shards.add(position, result)
                position += 1
            bar.update(len(chunk))
        check_not_all_skipped(skipped, total)
        written = shards.close()
    except BaseException:
        shards.abort()
        raise
    finally:
        bar.close()
        results.close()
    info = dataset_info(
        path,
        schema,
        written,
        skipped=skipped,
        options=options,
        formats=encoder.stored_formats(),
        sizes=encoder.stored_sizes(),
    )
    info.save()
    shards.remove_stale()
    return info


def check_not_all_skipped(skipped: list[SkippedExample], total: int) -> None:
    """Raises when every one of `total` examples was skipped (there is nothing to write)."""
    if skipped and len(skipped) == total:
        raise EncodeError(
            f"every one of the {total} examples was skipped; the first: "
            f"{skipped[0].origin}: {skipped[0].error}"
        )


def dataset_info(
    path: fs.AnyPath,
    schema: Schema,
    shards: list[ShardInfo],
    skipped: list[SkippedExample],
    options: WriteOptions,
    formats: Mapping[str, Collection[str]] | None = None,
    sizes: Mapping[str, tuple[int, int]] | None = None,
) -> DatasetInfo:
    """The metadata of a finished write (`DatasetInfo.save` writes it, last); `formats`, those
    the images of each Image feature were stored in, and `sizes`, the one size of each Image
    feature's images, when the writer noted them."""
    return DatasetInfo(
        name=path.name,
        directory=path.parent,
        schema=schema.as_written(formats, sizes),
        num_examples=sum(shard.num_examples for shard in shards),
        shards=tuple(shards),
        compression=options.compression,
        skipped=tuple(skipped),
        shuffled=options.shuffle,
        seed=options.seed if options.shuffle else None,
        tfpipe_version=importlib.metadata.version("tfpipe"),
    )
