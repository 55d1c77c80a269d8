"""Checking TFRecord datasets record by record: `verify`, `locate_fault`, named errors.

What one record goes through, and what each step catches::

    shard ──TFRecordDataset (both frame CRCs)──▶ record bytes      (damaged frames, truncation)
          ──tf.train.Example + Feature.stored──▶ stored values     (not an Example, missing or
                                                                    malformed features)
          ──decode_tensor in a parallel tf.data map──▶ image shape  (undecodable images, sizes
                                                                    other than the schema's)
    counts, sizes and CRC-32C digests per shard ──▶ compared with the metadata file, when
                                                    there is one

Every problem becomes a `Fault` naming the file, the record index within it and the feature.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import Any

import tensorflow as tf
from tqdm.auto import tqdm

from tfpipe import fs
from tfpipe.errors import (
    DataNotFoundError,
    DecodeError,
    SchemaError,
    SourceError,
    TfpipeError,
    tf_message,
)
from tfpipe.features import Image, Mask, decoding, imaging
from tfpipe.features.mask import check_mask_sizes, mask_image_pairs
from tfpipe.features.tracing import plain
from tfpipe.format.compression import compression_of, tf_compression
from tfpipe.format.frames import file_crc32c
from tfpipe.format.metadata import DatasetInfo, ShardInfo
from tfpipe.format.naming import SHARDS, metadata_path
from tfpipe.format.resolution import PathArg, ResolvedData, names_dataset, resolve
from tfpipe.records.infer import infer_schema
from tfpipe.records.resolved import RAW_ERRORS
from tfpipe.schema import Schema

_CHUNK = 256
_UNCHECKED = "no tfpipe metadata, so record counts, sizes and checksums were not checked"
_IMAGES = 1024


@dataclasses.dataclass(frozen=True)
class Fault:
    """One problem in a dataset: where it is and what is wrong.

    Examples:
        >>> from tfpipe.records import Fault
        >>> print(Fault("out/train-00001-of-00002.tfrecord", 7, "image", "bad JPEG"))
        record 7 of out/train-00001-of-00002.tfrecord, feature 'image': bad JPEG

    Attributes:
        file: the TFRecord shard, metadata file or image file.
        record: the record's index within `file`; None when the fault is the whole file's.
        feature: the feature concerned; None for the frame or the whole record.
        message: what is wrong.
    """

    file: str
    record: int | None
    feature: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.record is None else f"record {self.record} of {self.file}"
        if self.feature is not None:
            where += f", feature {self.feature!r}"
        return f"{where}: {self.message}"


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """What `verify` checked and every fault it found; `str(report)` lists them all.

    Examples:
        >>> report = tfpipe.verify("out/train")
        >>> report.ok, len(report.faults), report.summary()
        (True, 0, 'out/train: 24 records (metadata: 24) in 2 file(s), 24 images decoded: OK')

    Attributes:
        path: the path verified.
        files: the TFRecord files read.
        num_records: records whose frames were read intact, over all files.
        num_images: images decoded.
        expected_records: the example count of the metadata; None without metadata.
        faults: every problem found, in file and record order.
        notes: what could not be checked, and why (e.g. no metadata, so no counts).
        num_raw_images: raw images (stored as pixels, nothing to decode) whose pixel count
            was checked against the schema's shape.
    """

    path: str
    files: tuple[str, ...]
    num_records: int
    num_images: int
    expected_records: int | None
    faults: tuple[Fault, ...]
    notes: tuple[str, ...] = ()
    num_raw_images: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong.

        Examples:
            >>> report = tfpipe.verify("out/damaged")
            >>> report.ok, len(report.faults)
            (False, 1)
        """
        return not self.faults

    @property
    def checked(self) -> bool:
        """True when the record counts were compared with a metadata file (for tfpipe's, the
        sizes and CRC-32C digests too). Without one nothing tells what was written: a shard cut
        short at a record boundary reads as sound, so `ok` then only says that the records
        read are sound, and `tfpipe verify` exits with status 3, not 0.

        Examples:
            >>> report = tfpipe.verify("out/train")
            >>> report.checked, report.expected_records
            (True, 24)
        """
        return self.expected_records is not None

    def summary(self) -> str:
        """One line: what was read, and how many faults.

        Examples:
            >>> tfpipe.verify("out/damaged").summary()
            'out/damaged: ... records (metadata: 24) in 2 file(s), ... images decoded: 1 fault(s)'
        """
        expected = "" if self.expected_records is None else f" (metadata: {self.expected_records})"
        verdict = "OK" if self.ok else f"{len(self.faults)} fault(s)"
        if self.ok and not self.checked:
            verdict = f"UNCHECKED, no fault in the records read but {_UNCHECKED}"
        checked = []
        if self.num_images or not self.num_raw_images:
            checked.append(f"{self.num_images} images decoded")
        if self.num_raw_images:
            checked.append(
                f"{self.num_raw_images} raw images' pixel counts checked against the schema's "
                "shape (raw pixels need no decoding)"
            )
        return (
            f"{self.path}: {self.num_records} records{expected} in {len(self.files)} file(s), "
            f"{', '.join(checked)}: {verdict}"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *map(str, self.faults), *self.notes])


def from_input(error: BaseException) -> bool:
    """Whether a raw error was raised while a tf.data iterator produced the next element
    (not by a model's ops), so that reading the data again may find its cause."""
    if isinstance(error, UnicodeDecodeError | tf.errors.DataLossError):
        return True
    return isinstance(error, tf.errors.OpError) and "IteratorGetNext" in error.message


def named_error(fault: Fault, error: BaseException) -> DecodeError:
    """The DecodeError that replaces TensorFlow's `error`, naming where `fault` is."""
    dataset = fault.record is not None or ".tfrecord" in fault.file or fault.file.endswith(".json")
    fix = (
        "`tfpipe verify` lists every fault of the dataset; rewrite the shards it names"
        if dataset
        else "fix or remove the file"
    )
    raw = tf_message(error)
    # A Python function in the graph (a mask read with Pillow) raised what the fault says.
    repeated = raw in fault.message or fault.message in raw
    said = "" if repeated else f" (TensorFlow reported: {raw})"
    return DecodeError(f"{fault}{said}; {fix}")


def failing_images(
    values: Sequence[Any],
    feature: Image | Mask,
    size: tuple[int, int] | None = None,
    read_files: bool = False,
) -> Iterator[tuple[int, str]]:
    """Positions in `values` (encoded images, or file paths with `read_files`) that the
    tf.data decoder fails on or decodes to another shape than expected, and why.

    The images (or masks) are decoded with `decode_tensor` (the decoder of the tf.data path) in a
    parallel map; only the failures are decoded again, eagerly, for their messages. The
    expected shape is `size` when given, else the schema's height and width where declared.
    """
    if not len(values):
        return
    expected = size or feature.shape[:2]
    # Without a resize, decode with free height and width, so that the shape is measured.
    free: Any = (None, None, *feature.shape[2:])  # the channels of an Image, or of a Mask
    decoder = feature if size else dataclasses.replace(feature, shape=free)

    def load(data: tf.Tensor) -> tf.Tensor:
        return decoder.decode_tensor(tf.io.read_file(data) if read_files else data, size)

    def measure(index: tf.Tensor, data: tf.Tensor) -> tuple[tf.Tensor, ...]:
        image = load(data)
        # The maximum needs the pixels: a static shape alone would let TF skip the decode.
        return index, tf.shape(image), tf.reduce_max(image)

    decoded = (
        tf.data.Dataset.from_tensor_slices(list(values))
        .enumerate()
        .map(plain(measure), num_parallel_calls=tf.data.AUTOTUNE)
        .ignore_errors()
        .batch(_CHUNK)
    )
    shapes = {
        int(i): (int(shape[0]), int(shape[1]))
        for indices, batch, _ in decoded.as_numpy_iterator()
        for i, shape in zip(indices, batch, strict=True)
    }
    for position, value in enumerate(values):
        shape = shapes.get(position)
        if shape is None:
            try:
                load(tf.constant(value))
                yield position, "cannot be decoded"  # failed in the graph only
            except RAW_ERRORS as e:
                yield position, f"cannot be decoded: {tf_message(e)}"
        elif any(d is not None and d != n for d, n in zip(expected, shape, strict=True)):
            declared = "x".join("?" if d is None else str(d) for d in expected)
            yield position, f"image is {shape[0]}x{shape[1]}, the schema declares {declared}"


def _frames(file: fs.AnyPath, compression: str | None) -> Iterator[tuple[int, bytes] | Fault]:
    """`(index, record)` of every record whose frame checksums hold, then a Fault at the first
    damaged frame, if any. Records are read in batches; after a failure the batch is read
    again one record at a time to find the exact record."""
    dataset = tf.data.TFRecordDataset(str(file), tf_compression(compression))
    count = 0
    try:
        for batch in dataset.batch(_CHUNK).as_numpy_iterator():
            for record in batch:
                yield count, record
                count += 1
        return
    except tf.errors.OpError:
        pass
    try:
        for record in dataset.skip(count).as_numpy_iterator():
            yield count, record
            count += 1
    except tf.errors.OpError as e:
        yield Fault(str(file), count, None, f"damaged or truncated frame: {tf_message(e)}")


def _record_faults(
    file: str, index: int, *, record: bytes, schema: Schema, images: list[tuple[Any, ...]]
) -> Iterator[Fault]:
    """Faults of one record's Example and features; its encoded images go into `images`."""
    try:
        proto = tf.train.Example.FromString(record).features.feature
    except Exception as e:  # protobuf raises its own DecodeError type
        yield Fault(file, index, None, f"not a serialized tf.train.Example ({e})")
        return
    stored = {}
    for name, feature in schema.items():
        if name not in proto:
            yield Fault(file, index, name, f"missing; the record has {sorted(proto)}")
            continue
        try:
            value = stored[name] = feature.stored(proto[name])
            feature.check_stored(value)  # label ranges, UTF-8 texts, mask values
        except (TypeError, ValueError, OSError) as e:
            yield Fault(file, index, name, str(e))
            continue
        if feature.encoded_image:
            images.append((file, index, name, value))
    pairs = mask_image_pairs(dict(schema.items()))
    try:
        check_mask_sizes([p for p in pairs if set(p) <= set(stored)], stored)
    except ValueError as e:  # "<mask>: the mask is ... but image ... is ..."
        mask, why = str(e).split(": ", 1)
        yield Fault(file, index, mask, why)


def _image_faults(
    schema: Schema, images: list[tuple[Any, ...]], size: tuple[int, int] | None
) -> list[Fault]:
    """The faults of `(file, record, feature, encoded image)` entries, decoded in one map."""
    faults = []
    for name, feature in schema.of(Image, Mask).items():
        mine = [entry for entry in images if entry[2] == name]
        failed = dict(failing_images([e[3] for e in mine], feature, size))
        failed.update(_jpeg_warnings([e[3] for e in mine], skip=failed))
        for position, why in sorted(failed.items()):
            faults.append(Fault(mine[position][0], mine[position][1], name, why))
    return faults


def _jpeg_warnings(values: Sequence[bytes], skip: dict[int, str]) -> Iterator[tuple[int, str]]:
    """Positions of the JPEGs TensorFlow decodes though libjpeg reports corrupt data (a
    garbage body decodes to noise), and why; positions in `skip` are not checked."""
    for position, data in enumerate(values):
        if position not in skip and imaging.sniff_format(data) == "jpeg":
            warning = decoding.jpeg_warning(data)
            if warning is not None:
                yield position, f"corrupt JPEG: libjpeg reports {warning!r}"


class _Checker:
    """Checks files one after the other against a schema, counting what it read.

    Images are decoded `_IMAGES` at a time in one parallel map, on a background thread, while
    the next records are read and parsed; their faults come after those of later records.

    Attributes:
        records: records read with intact frames, per file.
        images: images decoded.
        raw_images: raw images whose pixel count was checked.
        complete: files read to their end without a damaged frame or a partial one.
    """

    def __init__(
        self, schema: Schema | None, image_size: tuple[int, int] | None, progress: Any = None
    ) -> None:
        self.schema = schema
        self.image_size = image_size
        self.progress = progress
        self.records: dict[str, int] = {}
        self.images = 0
        self.raw_images = 0
        self.complete: set[str] = set()
        self.listed: dict[str, ShardInfo] = {}
        self._images: list[tuple[Any, ...]] = []
        self._decoding: concurrent.futures.Future[list[Fault]] | None = None

    def faults(
        self, files: list[fs.AnyPath], info: DatasetInfo | None, compression: str | None
    ) -> Iterator[Fault]:
        """Every fault of the files, then the counts and sizes that differ from the metadata;
        `compression` None means each file's own."""
        if info is not None:
            self.listed = {str(f): s for s, f in zip(info.shards, info.files, strict=True)}
        with concurrent.futures.ThreadPoolExecutor(1, "tfpipe-verify") as pool:
            for file in files:
                yield from self._file(file, compression or compression_of(file), pool)
            yield from self._decode(pool, last=True)
        if info is not None:
            yield from self._counts(info, {str(f) for f in files})

    def _decode(self, pool: concurrent.futures.Executor, last: bool = False) -> Iterator[Fault]:
        """The faults of the images decoding in the background; starts on the pending ones."""
        if self._decoding is not None:
            yield from self._decoding.result()
            self._decoding = None
        if self._images:
            images, self._images = self._images, []
            self._decoding = pool.submit(_image_faults, self.schema, images, self.image_size)  # type: ignore[arg-type]
        if last and self._decoding is not None:
            yield from self._decode(pool)

    def _advance(self, size: int) -> None:
        if self.progress is not None:
            self.progress.update(size)

    def _file(
        self, file: fs.AnyPath, compression: str | None, pool: concurrent.futures.Executor
    ) -> Iterator[Fault]:
        """Every fault of one file, in record order within each chunk of records."""
        name = str(file)
        self.records[name] = 0
        size, read = file.stat().st_size, 0
        listed = self.listed.get(name)
        if size == 0 and (listed is None or listed.num_examples or listed.num_bytes):
            yield Fault(name, None, None, "the file is empty (0 bytes): an interrupted write?")
        pending: list[tuple[int, bytes]] = []
        damaged = False
        for item in _frames(file, compression):
            if isinstance(item, Fault):
                damaged = True
            else:
                pending.append(item)
                self.records[name] += 1
                self._advance(min(len(item[1]) + 16, size - read))
                read = min(size, read + len(item[1]) + 16)
            if pending and (damaged or len(pending) == _CHUNK):
                yield from self._chunk(name, pending, pool)
                pending = []
            if isinstance(item, Fault):
                yield item
        yield from self._chunk(name, pending, pool)
        self._advance(size - read)
        if not damaged and compression is None and read < size:
            yield Fault(
                name,
                self.records[name],
                None,
                f"{size - read} byte(s) after the last record: a partial frame (an interrupted "
                "write, or bytes appended), which TensorFlow's reader skips without a word",
            )
        elif not damaged:
            self.complete.add(name)

    def _chunk(
        self, file: str, records: list[tuple[int, bytes]], pool: concurrent.futures.Executor
    ) -> Iterator[Fault]:
        if self.schema is None or not records:
            return
        before = len(self._images)
        for index, record in records:
            yield from _record_faults(
                file, index, record=record, schema=self.schema, images=self._images
            )
        self.images += len(self._images) - before
        raw = [f for f in self.schema.of(Image).values() if not f.encoded_image]
        self.raw_images += len(raw) * len(records)
        if len(self._images) >= _IMAGES:
            yield from self._decode(pool)

    def _counts(self, info: DatasetInfo, selected: set[str]) -> Iterator[Fault]:
        """Shard counts and sizes that differ from the metadata, and shards it lists but
        lacks; of the `selected` files only (a glob may name some shards of a dataset)."""
        for shard, file in zip(info.shards, info.files, strict=True):
            name = str(file)
            if not file.is_file():
                yield Fault(name, None, None, "listed in the metadata but missing")
                continue
            if name not in selected:
                continue
            if file.stat().st_size != shard.num_bytes:
                found = f"the file has {file.stat().st_size} bytes"
                yield Fault(name, None, None, f"{found}, the metadata says {shard.num_bytes}")
            elif name in self.complete and shard.crc32c not in (None, file_crc32c(file)):
                yield Fault(
                    name,
                    None,
                    None,
                    f"its CRC-32C is {file_crc32c(file)}, the metadata says {shard.crc32c}: it "
                    "is not the file this dataset's write produced (another write's shard put "
                    "in its place, or bytes changed since); write the dataset again",
                )
            if name in self.complete and self.records[name] != shard.num_examples:
                found = f"the file holds {self.records[name]} records"
                yield Fault(name, None, None, f"{found}, the metadata says {shard.num_examples}")
        held = sum(self.records.values())
        if self.complete == {str(f) for f in info.files} and held != info.num_examples:
            yield Fault(
                str(info.metadata_path),
                None,
                None,
                f"the shards hold {held} records, the metadata says {info.num_examples}",
            )


def _declared(info: DatasetInfo, files: list[fs.AnyPath]) -> int:
    """The examples the metadata declares for `files` (some or all shards of the dataset)."""
    selected = {str(f) for f in files}
    return sum(
        s.num_examples for s, f in zip(info.shards, info.files, strict=True) if str(f) in selected
    )


def _targets(
    path: PathArg | ResolvedData, schema: Schema | None, reader: str
) -> tuple[list[fs.AnyPath], DatasetInfo | None, Schema | None, list[Fault], list[str]]:
    """The files to check, the metadata, the schema and what is already known to be wrong."""
    fs.check_paths(path, "path")
    faults: list[Fault] = []
    notes: list[str] = []
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    info: DatasetInfo | None
    if text is not None and names_dataset(text):
        try:
            data = resolve(text, check=False)  # missing or damaged shards: listed as faults
        except SchemaError as e:  # the dataset's own fault: listed, its shards still checked
            return _without_metadata(text, e, schema)
        info = data.info
        files = [f for f in data.files if f.is_file()]
        prefix = text.removesuffix(".json") if info is None else str(info.directory / info.name)
        listed = {str(f) for f in data.files}
        extra = [f for f in fs.glob(SHARDS.glob(fs.escape(prefix))) if f not in listed]
        if extra:
            notes.append(
                f"note: {len(extra)} file(s) match the prefix but are not in the metadata "
                f"(not checked; a glob or folder read would include them): {sorted(extra)[:3]}"
            )
    else:
        try:
            data = resolve(path)
        except (SourceError, DataNotFoundError) as e:  # shard sizes or sets that do not match
            try:
                data = resolve(path, check=False)
            except DataNotFoundError:
                raise e from None  # nothing to read at all: say why, as resolve() did
            faults.append(Fault(str(path), None, None, str(e)))
        files, info = data.record_files(reader), data.info
        if info is None:
            notes.append(
                f"note: {_UNCHECKED}: a shard cut short at a record boundary reads as sound; "
                "keep <prefix>.json beside the shards"
            )
    if schema is None and info is not None:
        schema = info.schema
    elif schema is None:
        try:
            schema = infer_schema(files)
        except TfpipeError as e:
            faults.append(Fault(str(files[0]), None, None, f"no schema could be inferred: {e}"))
            notes.append("note: without a schema, only the frames were checked")
    return files, info, schema, faults, notes


def _without_metadata(
    text: str, error: SchemaError, schema: Schema | None
) -> tuple[list[fs.AnyPath], None, Schema | None, list[Fault], list[str]]:
    """What `_targets` gives for a dataset whose metadata file is not valid: a fault naming
    it, and its prefix's shards to check without it (their schema inferred unless given)."""
    metadata = fs.path(text) if text.endswith(".json") else metadata_path(text)
    prefix = str(metadata)[: -len(".json")]
    files = [fs.path(f) for f in sorted(fs.glob(SHARDS.glob(fs.escape(prefix))))]
    faults = [Fault(str(metadata), None, None, str(error))]
    notes = ["note: the metadata is not valid, so record counts were not checked"]
    if files and schema is None:
        try:
            schema = infer_schema(files)
        except TfpipeError as e:
            faults.append(Fault(str(files[0]), None, None, f"no schema could be inferred: {e}"))
    return files, None, schema, faults, notes


def verify(
    path: PathArg | ResolvedData, schema: Schema | None = None, *, progress: bool = True
) -> VerifyReport:
    """Checks every record of a TFRecord dataset, for use after copying or writing one.

    Reads every record of every shard (uncompressed, gzip or zlib) checking both frame
    checksums, parses it against the schema, decodes every image with the decoder the tf.data
    path uses (in a parallel map), and compares the per-shard record counts, file sizes and
    CRC-32C digests (of the whole file, a second read of each shard) with the metadata file
    when there is one. A shard the metadata lists as empty (no records, 0 bytes: every example
    of it was skipped with `on_error="skip"`) is sound. `tfpipe verify PATH` runs it from the shell.

    Examples:
        >>> report = tfpipe.verify("out/train")
        >>> report.ok, report.num_records
        (True, 24)
        >>> print(tfpipe.verify("out/damaged"))
        out/damaged: ... 1 fault(s)
        record 5 of out/damaged-00001-of-00002.tfrecord: damaged or truncated frame: ...

    Args:
        path: a dataset prefix ("out/train"), its metadata file, a TFRecord file, a folder of
            them, a glob, or a list of these; local, or a URL TensorFlow opens ("gs://b/train").
        schema: the schema of the records. Defaults to the metadata's, or an inferred one.
        progress: show a progress bar when the check takes more than two seconds.
            Defaults to True.

    Returns:
        A `VerifyReport`; `report.ok` is False when anything is wrong, and `report.faults`
        names the file, record and feature of each problem; `report.checked` is False when
        there was no metadata to compare counts, sizes and checksums with (a shard cut short at
        a record boundary then passes unseen).

    Raises:
        DataNotFoundError: there are no TFRecord files at `path`.
    """
    files, info, schema, faults, notes = _targets(path, schema, "verify")
    total = sum(f.stat().st_size for f in files)
    compression = info.compression if info is not None else None
    with tqdm(
        total=total, unit="B", unit_scale=True, desc="verifying", delay=2.0, disable=not progress
    ) as bar:
        checker = _Checker(schema, None, bar)
        faults += checker.faults(files, info, compression)
    order = {str(f): k for k, f in enumerate(files)}  # records in order, then whole files
    faults.sort(key=lambda f: (order.get(f.file, len(order)), f.record is None, f.record or 0))
    return VerifyReport(
        path=str(path) if isinstance(path, str | os.PathLike) else f"{len(files)} paths",
        files=tuple(str(f) for f in files),
        num_records=sum(checker.records.values()),
        num_images=checker.images,
        expected_records=None if info is None else _declared(info, files),
        faults=tuple(faults),
        notes=tuple(notes),
        num_raw_images=checker.raw_images,
    )


def locate_fault(
    path: PathArg | ResolvedData,
    schema: Schema | None = None,
    *,
    image_size: tuple[int, int] | None = None,
) -> Fault | None:
    """The first damaged record of TFRecord files, or None when every record is sound.

    The same checks as `verify` (frames, Example parse, image decode), stopping at the first
    fault. It is what tfpipe runs to name the record behind a raw TensorFlow error.

    Examples:
        >>> tfpipe.locate_fault("out/train") is None
        True
        >>> tfpipe.locate_fault("out/damaged")
        Fault(file='out/damaged-00001-of-00002.tfrecord', record=5, feature=None, message=...)

    Args:
        path: what `verify` accepts.
        schema: the schema of the records. Defaults to the metadata's, or an inferred one.
        image_size: the size a reader resizes images to; stored images of another size are
            then not faults. Defaults to None (the schema's size must match).
    """
    files, info, schema, faults, _ = _targets(path, schema, "locate_fault")
    if faults:
        return faults[0]
    compression = info.compression if info is not None else None
    return first_fault(
        files, info=info, compression=compression, schema=schema, image_size=image_size
    )


def first_fault(
    files: list[fs.AnyPath],
    info: DatasetInfo | None,
    compression: str | None,
    schema: Schema | None,
    image_size: tuple[int, int] | None = None,
) -> Fault | None:
    """`locate_fault` over known files and metadata; `compression` None means each file's."""
    return next(iter(_Checker(schema, image_size).faults(files, info, compression)), None)
