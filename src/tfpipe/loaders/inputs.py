"""What `Pipeline` reads: TFRecord shards, in-memory sources, or a Keras `PyDataset`.

Each input turns into a list of named stages (label, function on a `tf.data.Dataset`) so that
`Pipeline.explain()` shows exactly what `build()` runs. TFRecords and in-memory sources give a
stream of cheap *records* (serialized bytes, or example indices) that are shuffled, batched and
then decoded per batch; a `PyDataset` gives decoded examples directly.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import Any, Protocol

import keras
import numpy as np
import tensorflow as tf

from tfpipe import fs
from tfpipe.errors import SchemaError, SourceError
from tfpipe.features import Image, Mask
from tfpipe.features.image import resize_and_scale, scale_label
from tfpipe.features.mask import mask_image_pairs, resize_nearest_tensor
from tfpipe.features.tracing import plain
from tfpipe.format.compression import tf_compression
from tfpipe.format.resolution import ResolvedData, resolve
from tfpipe.loaders.columns import graph_constant, load_mask, path_bytes, spec_of
from tfpipe.loaders.example_decoding import origin_of
from tfpipe.loaders.seeding import shuffled
from tfpipe.records.resolved import check_first_record, random_access, schema_for
from tfpipe.records.verification import Fault, failing_images, first_fault
from tfpipe.schema import Schema
from tfpipe.sources import SourceBase

AUTOTUNE = tf.data.AUTOTUNE
# One stage of the tf.data graph and its label, a line of `Pipeline.explain()`. The stages of
# fit's report (`training.map_costs`) are groups of these: the map()s, and all the others.
Stage = tuple[str, Callable[[tf.data.Dataset], tf.data.Dataset]]
# What `read` is given and gives: `Pipeline.shard`'s (num, index); the (epoch, first record) of a
# `start_at` epoch; its stages, and whether the records it yields get sharded after it.
Shard = tuple[int, int] | None
Start = tuple[Any, Any] | None
Reading = tuple[list[Stage], bool]
_MAX_CYCLE = 8
_RECORD_BUFFER = 4096
# Large buffers of large records (raw pixels) are slow to sample from: 4096 records of 48 KiB
# ran at half the speed of 1024. The record buffer holds at most this many bytes.
_RECORD_BUFFER_BYTES = 32 * 2**20
_MIN_RECORD_BUFFER = 256


@dataclasses.dataclass(frozen=True)
class Decoding:
    """How records become tensors: image size, reduced JPEG decode, rescale to float32.

    `image_size` applies to images (bilinear) and masks (nearest neighbour), `reduced_decode`
    and `rescale` to images only: masks keep their integer values.
    """

    image_size: tuple[int, int] | None
    reduced_decode: bool
    rescale: float | None

    def check(self, schema: Schema) -> None:
        """Raises when an image or a mask has no fixed size to batch at."""
        for name, feature in schema.of(Image, Mask).items():
            if None in (self.image_size or feature.decoded_shape[:2]):
                raise SchemaError(
                    f"{name}: {feature.kind}s of variable size cannot be batched; pass "
                    f"image_size=(height, width) to Pipeline, or declare "
                    f"{type(feature).__name__}(shape=...)"
                )

    @property
    def image_dtype(self) -> tf.DType:
        return tf.uint8 if self.rescale is None else tf.float32

    def describe(self, schema: Schema) -> str:
        parts = []
        if self.image_size is not None:
            parts.append(f"resize to {self.image_size[0]}x{self.image_size[1]}")
        if self.reduced_decode and self.image_size is not None:
            parts.append(scale_label(schema.of(Image), self.image_size))
        if self.rescale is not None:
            parts.append(f"float32 x {self.rescale:g}")
        if schema.of(Mask):
            parts.append("masks: nearest-neighbour resize, integer values, never rescaled")
        return f" ({', '.join(parts)})" if parts else ""


class PipelineInput(Protocol):
    """What a `Pipeline`'s graph asks of its input, whatever `make_input` made of the source.

    Its records (serialized examples, or indices) are read, sharded, shuffled and repeated.
    Those of an input that is not `decoded` are then batched and decoded per batch (`decoder`;
    when it `defers_images`, images are decoded per example after an unbatch, by
    `image_decoders`); a `decoded` input's records become examples through its `loader`.
    """

    @property
    def name(self) -> str:
        """The source, for messages and `explain()`."""

    @property
    def schema(self) -> Schema | None:
        """The schema of the examples; None for a PyDataset."""

    @property
    def num_examples(self) -> int | None:
        """The examples of one pass; None when unknown."""

    @property
    def decoded(self) -> bool:
        """Whether `loader` makes the examples (a PyDataset's batches), not `decoder`."""

    @property
    def servable(self) -> bool:
        """Whether tf.data service workers can run its stages."""

    @property
    def replayable(self) -> bool:
        """Whether every run reads the same records, so `start_at` can skip to a batch."""

    @property
    def positioned(self) -> bool:
        """Whether `read` starts at a `start_at` position itself (a mixture's sources)."""

    @property
    def mixture(self) -> Any:
        """The `tfpipe.loaders.mixture.Mixture` a mixed Pipeline reads; None for others."""

    def read(
        self, shard: Shard, seed: Any, shuffle: bool, det: bool, start: Start = None
    ) -> Reading:
        """Stages that yield the records; the second value says if records get sharded.
        `start` is the `(epoch, first record)` of a `start_at` epoch, which a `positioned`
        input starts at (others are skipped to it after `read`)."""

    def record_buffer(self, buffer: int | None) -> int:
        """The records the shuffle buffer holds, given `shuffle(buffer_size=buffer)`."""

    def declared_counts(self) -> list[int]:
        """The examples of each TFRecord file (-1: unknown); empty for other inputs."""

    def worker_counts(self, workers: int) -> list[int] | None:
        """The examples each of `workers` reads when the input deals itself out (a
        mixture); None when its files or records are dealt out."""

    def service_splits(self) -> str:
        """What the tf.data service hands to its workers, for `explain()`."""

    def decoder(self, decoding: Decoding, defer_images: bool = False) -> Stage:
        """The per-batch stage turning batches of records into examples."""

    def defers_images(self) -> bool:
        """Whether images are best decoded one example at a time after an unbatch."""

    def image_decoders(self, decoding: Decoding) -> Decoders:
        """What follows `decoder(defer_images=True)`: see `stored_image_decoders`."""

    def loader(self, det: bool) -> list[Stage]:
        """The stages turning the records of a `decoded` input into examples."""

    def locate_fault(self, decoding: Decoding) -> Fault | None:
        """The first damaged record or file; None when all are sound."""

    def identity(self) -> list[bytes | str]:
        """What identifies the examples, for `Pipeline.identity`."""

    def describe(self) -> str:
        """The input in a few words."""


class RecordInput:
    """TFRecord shards: file list -> (file shuffle) -> parallel interleaved reads."""

    decoded = False
    servable = True
    replayable = True
    positioned = False
    mixture = None

    def __init__(self, data: ResolvedData, schema: Schema | None, compression: str | None) -> None:
        files = data.record_files("Pipeline")
        info = data.info
        self.files = [str(f) for f in files]
        schema = schema_for(data, schema)
        self.compression = data.read_compression(compression)
        first_bytes = check_first_record(schema, files)
        self.schema = schema
        self.info = info
        self.num_examples = data.num_examples
        self.record_bytes = (
            info.num_bytes / info.num_examples
            if info is not None and info.num_examples
            else first_bytes
        )
        self.name = data.origin

    def read(
        self, shard: Shard, seed: Any, shuffle: bool, det: bool, start: Start = None
    ) -> Reading:
        """Stages that yield serialized records; the second value says if records get sharded."""
        by_file = shard is not None and len(self.files) >= shard[0]
        files, counts = self.files, np.array(self.declared_counts(), np.int64)
        listed = f"list {len(self.files)} TFRecord file(s) of {self.name}"
        if by_file:  # in the source: the tf.data service's split hands out what it lists
            num, index = shard  # type: ignore[misc]
            files, counts = files[index::num], counts[index::num]
            listed += f": shard files {index} of {num} ({len(files)} of them)"
        stages: list[Stage] = [
            (
                listed + (f" ({self.compression})" if self.compression else ""),
                lambda _: tf.data.Dataset.from_tensor_slices(
                    (files, tf.constant(counts, tf.int64))
                ),
            )
        ]
        if shuffle and (shard is None or by_file):
            stages.append(
                (
                    f"shuffle file list (seed={seed}, reshuffled each epoch)",
                    lambda ds: shuffled(ds, len(self.files), seed),
                )
            )
        cycle = min(len(files), _MAX_CYCLE)
        compression = tf_compression(self.compression)
        known = None if len(set(counts >= 0)) > 1 else bool((counts >= 0).all())
        stages.append(
            (
                f"interleave reads of {cycle} file(s) at a time (parallel, AUTOTUNE)",
                lambda ds: ds.interleave(
                    plain(lambda f, n: _records(f, n, compression, known)),
                    cycle_length=cycle,
                    num_parallel_calls=AUTOTUNE,
                    deterministic=det,
                ),
            )
        )
        return stages, not by_file

    def worker_counts(self, workers: int) -> None:
        """None: its files or records are dealt out to the workers."""

    def declared_counts(self) -> list[int]:
        """The record count the metadata declares for each file; -1 where none does."""
        info = self.info
        declared = {} if info is None else {s.file: s.num_examples for s in info.shards}
        return [declared.get(os.path.basename(f), -1) for f in self.files]

    def record_buffer(self, buffer: int | None) -> int:
        """`buffer`, else min(examples, 4096, as many as fit in 32 MiB but at least 256)."""
        by_bytes = max(_MIN_RECORD_BUFFER, int(_RECORD_BUFFER_BYTES // max(1, self.record_bytes)))
        return buffer or min(self.num_examples or _RECORD_BUFFER, _RECORD_BUFFER, by_bytes)

    def service_splits(self) -> str:
        return f"the {len(self.files)} TFRecord file(s)"

    def loader(self, det: bool) -> list[Stage]:
        """No stages: the records are batched and decoded (`decoder`)."""
        return []

    def identity(self) -> list[bytes | str]:
        """What identifies the records: file names, sizes, the CRC-32C digest of each file
        when its metadata keeps one (another write of the same names, sizes and counts, e.g.
        with another seed, differs there), and the example count (local files or URLs)."""
        digests = {}
        if self.info is not None:
            digests = {
                str(f): s.crc32c for s, f in zip(self.info.shards, self.info.files, strict=True)
            }
        parts = []
        for file in self.files:
            part = f"{os.path.basename(file)}:{fs.path(file).stat().st_size}"
            digest = digests.get(file)
            parts.append(part if digest is None else f"{part}:{digest}")
        return [*parts, str(self.num_examples)]

    def describe(self) -> str:
        return f"{self.name} ({len(self.files)} TFRecord file(s), {self.num_examples} examples)"

    def decoder(self, decoding: Decoding, defer_images: bool = False) -> Stage:
        """The per-batch stage: vectorised parse_example, then per-element image decode (in a
        `tf.map_fn`), or, with `defer_images`, images and masks left as stored bytes for
        `image_decoder` after an unbatch."""
        decoding.check(self.schema)

        def decode(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
            return self.schema.parse(
                serialized,
                image_size=decoding.image_size,
                reduced_decode=decoding.reduced_decode,
                rescale=decoding.rescale,
                defer_images=defer_images,
            )

        if defer_images:
            what = ", images and masks kept as stored bytes"
        elif _has_images(self):
            what = " + decode images per element" + decoding.describe(self.schema)
        else:
            what = ""
        return (
            f"parse_example (vectorised){what}",
            lambda ds: ds.map(plain(decode), num_parallel_calls=AUTOTUNE),
        )

    def defers_images(self) -> bool:
        """Whether images or masks are stored encoded (JPEG, PNG): decoding them one example
        at a time in a parallel map beats a `tf.map_fn` over a batch when the examples are
        unbatched anyway (raw pixels decode in one op per batch)."""
        return any(feature.encoded_image for feature in self.schema.values())

    def image_decoders(self, decoding: Decoding) -> Decoders:
        """What follows `decoder(defer_images=True)`: see `stored_image_decoders`."""
        return stored_image_decoders(self.schema, decoding)

    def locate_fault(self, decoding: Decoding) -> Fault | None:
        """The first damaged record of the shards: frame, Example, feature or image."""
        files = [fs.path(f) for f in self.files]
        return first_fault(
            files,
            info=self.info,
            compression=self.compression,
            schema=self.schema,
            image_size=decoding.image_size,
        )


def _has_images(inp: RecordInput | MemoryInput) -> bool:
    """Whether the input's schema has an Image or a Mask (else nothing is decoded or resized)."""
    return bool(inp.schema.of(Image, Mask))


Decoders = tuple[Stage, str, Callable[..., dict[str, tf.Tensor]]]


def stored_image_decoders(schema: Schema, decoding: Decoding) -> Decoders:
    """The per-example decode of the images and masks `schema` holds as stored bytes, after an
    unbatch: a parallel map of single decodes keeps every core busy, where a `tf.map_fn` over
    each batch left the parallelism to the autotuner's guess per batch.

    Returns the stage reading the images' EXIF orientations per batch (a few vectorised ops)
    into `(batch, orientations)` pairs; the label of the decode; and the function decoding one
    `(example, orientations)` pair, to run in a parallel map of its own or in the next map's.
    """
    images = schema.of(Image)

    def orient(batch: dict[str, tf.Tensor]) -> tuple[dict[str, tf.Tensor], Any]:
        turns = {name: feature.orientations(batch[name]) for name, feature in images.items()}
        return batch, {name: turn for name, turn in turns.items() if turn is not None}

    def decode(example: dict[str, tf.Tensor], turns: Any) -> dict[str, tf.Tensor]:
        return schema.decode_images(
            example,
            image_size=decoding.image_size,
            reduced_decode=decoding.reduced_decode,
            rescale=decoding.rescale,
            orientations=turns,
        )

    read = "read the EXIF orientation of every JPEG (vectorised)"
    if not any(feature.reads_orientation for feature in images.values()):
        read = "no EXIF orientations to read (JPEGs stored upright, says the metadata)"
    orient_stage = (read, lambda ds: ds.map(plain(orient), num_parallel_calls=AUTOTUNE))
    return orient_stage, "decode images per example" + decoding.describe(schema), plain(decode)


def _records(
    file: tf.Tensor, count: tf.Tensor, compression: str, known: bool | None
) -> tf.data.Dataset:
    """The records of one file; a file that holds another count than its metadata's `count`
    (-1: none) fails at its end, so an epoch never silently reads fewer or more examples.
    The built dataset names the file (`Pipeline.locate_fault`).

    `known`: whether every file's count is known (True) or none is (False): then no
    conditional on the count, whose two dataset branches took ~0.02 s to trace; None: some.
    """
    records = tf.data.TFRecordDataset(file, compression, buffer_size=1 << 20)
    if known is not None:
        return records.apply(tf.data.experimental.assert_cardinality(count)) if known else records
    return tf.cond(
        count >= 0,
        lambda: records.apply(tf.data.experimental.assert_cardinality(count)),
        lambda: records,
    )


def _columns(source: Any) -> dict[str, np.ndarray]:
    """The examples of an in-memory source as arrays (`SourceBase.columns`)."""
    columns = source.columns() if isinstance(source, SourceBase) else None
    if columns is None:
        raise SourceError(
            "source: expected a TFRecord prefix, file, glob or list of files, a tfpipe source "
            "(from_directory, from_dataframe, from_arrays, or a split of one) or a "
            f"keras.utils.PyDataset. Received: {type(source).__name__}"
        )
    return columns


class _IndexedInput:
    """An input whose records are the indices 0..count-1 (of examples, or of batches)."""

    count: int
    unit: str
    name: str
    positioned = False
    mixture = None

    def read(
        self, shard: Shard, seed: Any, shuffle: bool, det: bool, start: Start = None
    ) -> Reading:
        """Stages that yield the indices (a shard's in the source, which the tf.data service
        splits); they are shuffled as records."""
        label = f"indices of {self.count} {self.unit} of a {self.name}"
        first, step = (0, 1) if shard is None else (shard[1], shard[0])
        if shard is not None:
            label += f": shard records {first} of {step} (from {first} in steps of {step})"
        return [(label, lambda _: tf.data.Dataset.range(first, self.count, step))], False

    def identity(self) -> list[bytes | str]:
        """What identifies the examples: their count (a MemoryInput adds its columns)."""
        return [self.name, str(self.count)]

    def declared_counts(self) -> list[int]:
        """None: the records are not files."""
        return []

    def worker_counts(self, workers: int) -> None:
        """None: its records are dealt out to the workers."""

    def describe(self) -> str:
        return f"{self.name} of {self.count} {self.unit}"


class MemoryInput(_IndexedInput):
    """A folder, DataFrame or arrays: indices are the records; files are read in the graph."""

    decoded = False
    servable = True
    replayable = True
    unit = "examples"

    def __init__(self, source: Any) -> None:
        self.columns = _columns(source)
        self.schema: Schema = source.schema
        self.num_examples = self.count = len(source)
        self.name = type(source).__name__
        self.origin = functools.partial(origin_of, source)
        """Where an example came from, as `SequenceLoader` names it ("row 3 (a.png)")."""

    def record_buffer(self, buffer: int | None) -> int:
        """`buffer`, else every example (their indices are small)."""
        return buffer or self.num_examples

    def service_splits(self) -> str:
        return f"the {self.num_examples} example indices"

    def loader(self, det: bool) -> list[Stage]:
        """No stages: the records are batched and decoded (`decoder`)."""
        return []

    def identity(self) -> list[bytes | str]:
        """What identifies the examples: every column's values (image paths, labels, arrays)."""
        parts = super().identity()
        for name, column in sorted(self.columns.items()):
            rows = [np.asarray(v).tobytes() for v in column] if column.dtype == object else []
            parts += [name, repr(column.dtype), b"".join(rows) or column.tobytes()]
        return parts

    def _files(self) -> list[str]:
        """The Image and Mask features whose columns are file paths, read in the graph."""
        stored = self.schema.of(Image, Mask)
        return [
            name
            for name, column in self.columns.items()
            if name in stored and column.dtype.kind in "USO"
        ]

    def _file_pairs(self) -> list[tuple[str, str]]:
        """The (mask, image) features both read from files: their sizes are compared as the
        masks are read."""
        return mask_image_pairs({name: self.schema[name] for name in self._files()})

    def defers_images(self) -> bool:
        """Whether images are read from files: decoded one example at a time after an unbatch
        (arrays of pixels are resized per batch, in one op)."""
        return bool(self._image_files())

    def image_decoders(self, decoding: Decoding) -> Decoders:
        """What follows `decoder(defer_images=True)`: see `stored_image_decoders`."""
        files = Schema({name: self.schema[name] for name in self._image_files()})
        return stored_image_decoders(files, decoding)

    def _image_files(self) -> list[str]:
        images = self.schema.of(Image)
        return [name for name in self._files() if name in images]

    def decoder(self, decoding: Decoding, defer_images: bool = False) -> Stage:
        """The per-batch stage: gather the examples' columns; arrays are resized per batch,
        image files decoded per element (`tf.map_fn`) or, with `defer_images`, read into
        their bytes for `image_decoders` after an unbatch."""
        decoding.check(self.schema)
        files = self._files()
        constants = {
            name: graph_constant(column, name in files) for name, column in self.columns.items()
        }
        pairs = self._file_pairs()

        def image_of(name: str, feature: Image, values: tf.Tensor) -> tf.Tensor:
            size: tuple[int, int] = decoding.image_size or feature.shape[:2]  # type: ignore[assignment]
            if name in files and defer_images:
                return tf.map_fn(tf.io.read_file, values, fn_output_signature=tf.string)
            if name in files:
                return tf.map_fn(
                    lambda path: feature.decode_tensor(
                        tf.io.read_file(path), size, decoding.reduced_decode, decoding.rescale
                    ),
                    values,
                    fn_output_signature=tf.TensorSpec(
                        (*size, feature.channels), decoding.image_dtype
                    ),
                )
            same = tuple(values.shape[1:3]) == tuple(size)
            return resize_and_scale(values, None if same else size, decoding.rescale)

        def mask_of(name: str, feature: Mask, values: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
            size: tuple[int, int] = decoding.image_size or feature.shape[:2]  # type: ignore[assignment]
            if name not in files:
                same = tuple(values.shape[1:3]) == tuple(size)
                return values if same else resize_nearest_tensor(values, size, axis=1)
            # Pillow, as the writer and SequenceLoader read masks: TensorFlow's PNG decoder
            # gives the colours of a palette PNG, not its class indices.
            images = [image for mask, image in pairs if mask == name]
            masks = tf.numpy_function(
                lambda paths, rows, *image_paths: np.stack(
                    [
                        load_mask(
                            feature,
                            name,
                            size=size,
                            path=path,
                            images=dict(zip(images, paired, strict=True)),
                            where=self.origin(int(index)),
                        )
                        for path, index, *paired in zip(paths, rows, *image_paths, strict=True)
                    ]
                ),
                [values, indices, *(tf.gather(constants[image], indices) for image in images)],
                tf.as_dtype(feature.dtype),
                stateful=False,
            )
            masks.set_shape((None, *size, *feature.shape[2:]))
            return masks

        image_features, mask_features = self.schema.of(Image), self.schema.of(Mask)

        def decode(indices: tf.Tensor) -> dict[str, tf.Tensor]:
            batch = {}
            for name, constant in constants.items():
                values = tf.gather(constant, indices)
                if name in image_features:
                    values = image_of(name, image_features[name], values)
                elif name in mask_features:
                    values = mask_of(name, mask_features[name], values, indices)
                batch[name] = values
            return batch

        if defer_images:
            what = "read image files (their bytes, decoded after the unbatch)"
        else:
            what = "read + decode image files per element" if files else "gather arrays"
        if _has_images(self):
            what += decoding.describe(self.schema)
        return (
            f"gather examples; {what}",
            lambda ds: ds.map(plain(decode), num_parallel_calls=AUTOTUNE),
        )

    def locate_fault(self, decoding: Decoding) -> Fault | None:
        """The first image or mask file that cannot be read or decoded (arrays cannot be
        damaged)."""
        image_features, mask_features = self.schema.of(Image), self.schema.of(Mask)
        for name, column in self.columns.items():
            if name in mask_features and column.dtype.kind in "USO":
                images = [image for mask, image in self._file_pairs() if mask == name]
                for row, path in enumerate(column):
                    paired = {image: self.columns[image][row] for image in images}
                    try:
                        load_mask(
                            mask_features[name],
                            name,
                            size=decoding.image_size,
                            path=path,
                            images=paired,
                            where=self.origin(row),
                        )
                    except (TypeError, ValueError, OSError) as e:  # the message names the file
                        return Fault(str(path), None, name, str(e).removeprefix(f"{path}: "))
            if name in image_features and column.dtype.kind in "USO":
                feature = image_features[name]
                size = decoding.image_size or feature.shape[:2]
                paths = path_bytes(column)
                for position, why in failing_images(paths, feature, size, read_files=True):  # type: ignore[arg-type]
                    return Fault(str(column[position]), None, name, why)
        return None


class PyDatasetInput(_IndexedInput):
    """A `keras.utils.PyDataset`: batches loaded by a generator, then split into examples."""

    decoded = True
    servable = False  # its generator runs in this process
    replayable = False  # its batches are its own, the same or not in every run
    unit = "batches"

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.count = len(dataset)
        if self.count == 0:
            raise SourceError("source: the PyDataset is empty (len() == 0)")
        first = dataset[0]
        self.signature = spec_of(first)
        self.schema = None
        self.num_examples = None
        self.name = type(dataset).__name__

    def locate_fault(self, decoding: Decoding) -> Fault | None:
        """None: a PyDataset's own errors name what failed, tfpipe cannot look inside it."""
        return None

    def record_buffer(self, buffer: int | None) -> int:
        """Every batch index, whatever `buffer` says (its batches are the records)."""
        return self.count

    def service_splits(self) -> str:
        return f"the {self.count} batch indices"

    def decoder(self, decoding: Decoding, defer_images: bool = False) -> Stage:
        """Refused: a PyDataset's batches are decoded; its `loader` makes the examples."""
        raise TypeError("a PyDataset yields decoded batches: its loader() makes the examples")

    def defers_images(self) -> bool:
        """False: a PyDataset decodes its own images."""
        return False

    def image_decoders(self, decoding: Decoding) -> Decoders:
        """Refused: a PyDataset decodes its own images."""
        raise TypeError("a PyDataset yields decoded batches: it has no images to decode")

    def _load(self, index: Any) -> Any:
        batch = self.dataset[int(index)]
        yield tuple(batch) if isinstance(batch, list) else batch

    def loader(self, det: bool) -> list[Stage]:
        def load(index: tf.Tensor) -> tf.data.Dataset:
            return tf.data.Dataset.from_generator(
                self._load, args=(index,), output_signature=self.signature
            )

        return [
            (
                "load batches with a generator (explicit output_signature, parallel)",
                lambda ds: ds.interleave(
                    load, cycle_length=2, num_parallel_calls=AUTOTUNE, deterministic=det
                ),
            ),
            ("unbatch into examples", lambda ds: ds.unbatch()),
        ]


def make_input(
    source: Any, schema: Any, compression: str | None, split: str | None = None
) -> PipelineInput:
    """The input of a `Pipeline` for `source`: TFRecords or a folder of images named by a path
    (see `tfpipe.format.resolution.resolve`), an in-memory source or a PyDataset."""
    if isinstance(source, str | os.PathLike | list | tuple | ResolvedData):
        data = (
            source  # resolved once, above (fit's adapter)
            if isinstance(source, ResolvedData) and split is None
            else resolve(source, split=split, argument="source")
        )
        if data.image_folder is None:
            return RecordInput(data, schema, compression)
        return MemoryInput(random_access(data, schema))
    if split is not None:
        raise ValueError(
            "split= names a split of a dataset folder; a tfpipe source or a PyDataset has "
            f"none. Received: split={split!r}"
        )
    if schema is not None:
        raise ValueError(
            "schema= applies to TFRecord sources only; a tfpipe source carries its own schema"
        )
    if isinstance(source, keras.utils.PyDataset):
        return PyDatasetInput(source)
    return MemoryInput(source)
