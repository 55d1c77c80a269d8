"""`tfpipe.SequenceLoader`: a Keras `PyDataset` that loads whole batches from any tfpipe source.

One batch, as `model.fit` asks for it::

    batch index ──order of this epoch──▶ example indices ──source[i]──▶ stored values
        ──images: one call of the Pipeline's decode graph (Image.load_batch), which makes
          the image batch itself (float32 times rescale, or uint8) when there is no transform
        ──other features: Feature.load ──▶ transform(example, rng) ──▶ one array per feature

The order of an epoch is a permutation derived from `(seed, epoch)`, so every example appears
exactly once per epoch, in a new order after each `on_epoch_end`, and every worker thread or
process computes the same order without sharing state.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfpipe.distribute.sharding import DistributedFeed
from tfpipe.errors import DecodeError, SchemaError, SourceError, TfpipeWarning
from tfpipe.features import Feature, Image, Mask, Tensor, Text
from tfpipe.format.resolution import names_paths
from tfpipe.loaders import workers as worker_processes
from tfpipe.loaders.distributed_loader import DistributableLoader, distribute_loader
from tfpipe.loaders.example_decoding import ExampleDecoder, origin_of
from tfpipe.loaders.loader_options import LoaderOptions
from tfpipe.loaders.padding import Cuts, check_pad
from tfpipe.loaders.position import Identity, check_position, digest
from tfpipe.loaders.read_ahead import ReadAhead
from tfpipe.loaders.supervised import feature_names, pick
from tfpipe.records.resolved import random_access
from tfpipe.schema import Schema

Selection = str | Sequence[str] | Mapping[str, str] | None
# `transform(example, rng) -> example`: a numpy augmentation of one example (not a Pipeline's
# map or filter, `tfpipe.loaders.transforms.Transform`).
Augmentation = Callable[[dict[str, np.ndarray], np.random.Generator], Mapping[str, Any]]


def _names(selection: Selection) -> list[str]:
    return [] if selection is None else feature_names("x or y", selection, "SequenceLoader")


def indexed_source(source: Any) -> tuple[Any, Schema]:
    """The source a loader reads at random, and its schema: a path resolved as every reader
    resolves it (`tfpipe.records.resolved.random_access`), or a source as it is."""
    if names_paths(source):
        source = random_access(source)
    schema = getattr(source, "schema", None)
    if not isinstance(schema, Schema) or not hasattr(source, "__getitem__"):
        raise SourceError(
            "source must be a path (what tfpipe.Pipeline reads: a dataset prefix, TFRecord "
            "files, a folder of class folders of images), a tfpipe source (from_directory, "
            "from_dataframe, from_arrays, from_tfrecords) or have __len__, __getitem__ and "
            f"a schema; got {source!r}"
        )
    return source, schema


def check_selection(
    selection: Selection, argument: str, schema: Schema, where: str = "SequenceLoader"
) -> Selection:
    """Normalizes x / y to a name, a tuple of names or a dict of names, all in the schema
    (`where`: the loader an error names)."""
    if selection is None:
        return None
    schema.check_names(feature_names(argument, selection, where), argument)
    if isinstance(selection, str | Mapping):
        return selection if isinstance(selection, str) else dict(selection)
    return tuple(selection)


def aligned_empty(shape: tuple[int, ...], dtype: Any, alignment: int = 64) -> np.ndarray:
    """`np.empty(shape, dtype)` starting at a multiple of `alignment` bytes.

    TensorFlow takes a numpy array aligned to 64 bytes (its CPU allocator's alignment) as a
    tensor without copying it: `tf.data.Dataset.from_generator`, which Keras's adapter feeds
    `model.fit` with, copied every unaligned batch (numpy's large arrays start 16 bytes into a
    page), 4.7 ms of CPU per 64x128x128x3 float32 batch against 1.9 ms aligned.

    Examples:
        >>> from tfpipe.loaders.sequence import aligned_empty
        >>> batch = aligned_empty((4, 8, 8, 3), "float32")
        >>> batch.shape, batch.dtype, batch.ctypes.data % 64
        ((4, 8, 8, 3), dtype('float32'), 0)
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    buffer = np.empty(size + alignment, np.uint8)
    start = -buffer.ctypes.data % alignment
    return buffer[start : start + size].view(dtype).reshape(shape)


class SequenceLoader(keras.utils.PyDataset):
    """Batches of any tfpipe source for `model.fit`, `evaluate` and `predict`.

    Every example appears exactly once per epoch: in a new order after each epoch with
    `shuffle=True` (the same orders for the same `seed`), in source order with `shuffle=False`.
    Images get the pixels `Pipeline` gives (one resize on every path: a JPEG at least twice the
    target is decoded at a reduced DCT scale, then averaged over blocks and resized bilinearly).
    In worker threads the images of a batch are decoded by one call of the Pipeline's graph,
    outside the GIL, and each batch is one array per feature, aligned so that `model.fit`
    takes it without a copy.

    Examples:
        >>> loader = tfpipe.SequenceLoader(tfpipe.from_directory("images"), batch_size=8,
        ...                                image_size=(32, 32), seed=0)
        >>> images, labels = loader[0]
        >>> images.shape, images.dtype, labels.dtype
        ((8, 32, 32, 3), dtype('float32'), dtype('int64'))
        >>> history = model.fit(loader, epochs=2, verbose=0)

    Args:
        source: a path that `tfpipe.Pipeline` reads (a dataset prefix, uncompressed TFRecord
            files, a folder of class folders of images), any tfpipe source (`from_directory`,
            `from_dataframe`, `from_arrays`, `from_tfrecords`), or an object with `__len__`,
            `__getitem__` and a `schema`.
        batch_size: examples per batch. Defaults to 32.
        x: the model input: a feature name, a list of names (multi-input), or a dict of model
            input name -> feature name. Defaults to "image".
        y: the target, named like `x`; None for prediction. Defaults to "label".
        image_size: resize images (block means, then bilinear, when shrinking) and masks
            (`tfpipe.Mask`, nearest neighbour, so they stay aligned) to `(height, width)`.
            Defaults to the schema's shapes.
        shuffle: reshuffle every epoch. Defaults to True.
        seed: seed of the orders and of the generators given to `transform`. Defaults to None
            (a random seed drawn once, shared by all workers).
        drop_remainder: drop the last batch when it is partial. Defaults to False.
        transform: `transform(example, rng) -> example`, a numpy augmentation of one example
            (decoded uint8 images and integer masks at `image_size`, before `rescale`) with a
            `numpy.random.Generator` seeded from `(seed, epoch, example index)`. A transform
            that changes shapes (a crop) has an `output_shape(name, shape)` method giving the
            shape it makes of each feature, as `tfpipe.augment.Joint` does. Defaults to None.
        dtype: the dtype of image batches; masks keep their own integer dtype. Defaults to
            "float32".
        rescale: multiply the pixels of `Image` features by this finite number > 0; None keeps
            0..255. Masks are never rescaled. Defaults to 1/255.
        workers: threads (or processes) Keras loads batches with. Defaults to 1.
        use_multiprocessing: use worker processes instead of threads; a worker killed by the
            kernel (out of memory) stops training with a `TfpipeError` naming it, instead of
            hanging it (see `tfpipe.loaders.WatchedPool`). Defaults to False.
        max_queue_size: batches Keras prepares ahead. Defaults to 10.
        reduced_decode: decode JPEGs at least twice `image_size` at a reduced DCT scale, as
            `Pipeline(reduced_decode=...)` does; False decodes in full. Defaults to True.
        pad: feature name -> length: batch these variable-length `Tensor(shape=(None, ...))`
            features as arrays `(batch, length, ...)` of their dtype filled with `pad_value`,
            the values `Pipeline(pad=...)` gives; a longer value fails with a `DecodeError`
            naming the feature and the example. A selected list not in `pad` is refused.
            Defaults to None.
        pad_value: the value padding fills in. Defaults to 0.
        truncate: cut values longer than their pad length to their first rows instead of
            failing; `truncated()` counts them (and `tfpipe.fit` warns). Not with
            `use_multiprocessing=True` (the counts would stay in the workers). Defaults to
            False.
    """

    def __init__(
        self,
        source: Any,
        batch_size: int = 32,
        x: Selection = "image",
        y: Selection = "label",
        image_size: tuple[int, int] | None = None,
        shuffle: bool = True,
        seed: int | None = None,
        drop_remainder: bool = False,
        transform: Augmentation | None = None,
        dtype: str = "float32",
        rescale: float | None = 1 / 255,
        workers: int = 1,
        use_multiprocessing: bool = False,
        max_queue_size: int = 10,
        reduced_decode: bool = True,
        pad: Mapping[str, int] | None = None,
        pad_value: float = 0,
        truncate: bool = False,
    ) -> None:
        options = LoaderOptions(
            batch_size=batch_size, image_size=image_size, shuffle=shuffle, seed=seed,
            drop_remainder=drop_remainder, dtype=dtype, rescale=rescale, workers=workers,
            use_multiprocessing=use_multiprocessing, max_queue_size=max_queue_size,
            reduced_decode=bool(reduced_decode),
        )  # fmt: skip
        super().__init__(
            workers=workers, use_multiprocessing=use_multiprocessing, max_queue_size=max_queue_size
        )
        if use_multiprocessing:  # a killed worker process then fails fit instead of hanging it
            worker_processes.install()
        source, schema = indexed_source(source)
        if x is None:
            raise ValueError("x must name the model input feature(s). Received: x=None")
        if transform is not None and not callable(transform):
            raise ValueError(f"transform must be callable or None. Received: {transform!r}")
        self.source = source
        self.schema = schema
        self.options = options
        self._images, self._masks = schema.of(Image), schema.of(Mask)
        self.x = check_selection(x, "x", schema)
        self.y = check_selection(y, "y", schema)
        self.transform = transform
        self._set_padding(pad, pad_value, truncate, use_multiprocessing)
        self._layout = {
            name: self._feature_layout(name, schema[name])
            for name in dict.fromkeys(_names(self.x) + _names(self.y))
        }
        self._decoder = self._example_decoder()
        self._graph_batches, self._graph_rescale = self._graph_made()
        output_shape = getattr(transform, "output_shape", None)  # e.g. tfpipe.augment.Joint
        self._batch_shapes = {  # after the transform; _layout's shapes are those loaded
            name: tuple(output_shape(name, shape)) if callable(output_shape) else shape
            for name, (shape, _) in self._layout.items()
        }
        if options.image_size is not None and not any(
            n in self._images or n in self._masks for n in self._layout
        ):
            warnings.warn(
                f"image_size={options.image_size} is ignored: x and y select no Image or Mask "
                "feature",
                TfpipeWarning,
                stacklevel=2,
            )
        self._size = len(source)
        self._first_batch = 0  # set by start_at: this loader is the rest of an epoch
        if self._size == 0:
            raise SourceError("source is empty: a loader needs at least one example")
        if len(self) == 0:
            raise SourceError(
                f"source has {self._size} examples, fewer than batch_size={batch_size}, and "
                "drop_remainder=True leaves no batch"
            )
        self._seed = int(np.random.default_rng().integers(2**63) if seed is None else seed)
        self._scale = None if rescale is None else np.asarray(rescale, options.dtype)
        self.epoch = 0
        self._order_cache: tuple[int, np.ndarray] | None = None
        self._ahead = self._read_ahead()

    def _graph_made(self) -> tuple[bool, float | None]:
        """Whether the decode graph makes the image batches themselves, and the rescale it
        applies: with nothing between decode and batch (no transform) and a dtype it makes,
        float32 times rescale (1 for None) or uint8 pixels. No cast, rescale or copy in
        Python then, and the arrays are TensorFlow's own, which Keras's adapter takes without
        a copy."""
        dtype, rescale = self.options.dtype, self.options.rescale
        if self.transform is not None or dtype not in ("float32", "uint8"):
            return False, None
        return True, ((1.0 if rescale is None else rescale) if dtype == "float32" else None)

    def _read_ahead(self) -> ReadAhead | None:
        """With `workers` threads, the first batches of the next epoch loaded while Keras
        stops and restarts them between epochs (`tfpipe.loaders.read_ahead`); None with one
        worker (Keras loads in its own thread then, without a pause) or with processes."""
        workers, processes = self.options.workers, self.options.use_multiprocessing
        if workers == 1 or processes:
            return None
        return ReadAhead(self._batch, len(self), self.options.max_queue_size, workers)

    def _set_padding(
        self, pad: Any, pad_value: Any, truncate: Any, use_multiprocessing: bool
    ) -> None:
        """Checks `pad=`, `pad_value=` and `truncate=` (as `Pipeline` does) and makes the
        counter of the values cut, in this process."""
        self._pads = {one.name: one for one in check_pad(pad, pad_value, truncate, self.schema)}
        cutting = [name for name, one in self._pads.items() if one.truncate]
        if cutting and use_multiprocessing:
            raise ValueError(
                "truncate=True counts the values it cuts in this process, and "
                "use_multiprocessing=True loads batches in others; pass one of them. "
                "Received: truncate=True, use_multiprocessing=True"
            )
        self._cuts = Cuts(cutting)
        selected = _names(self.x) + _names(self.y)
        if unselected := [name for name in self._pads if name not in selected]:
            warnings.warn(
                f"pad is ignored for {unselected}: x and y do not select them",
                TfpipeWarning,
                stacklevel=3,
            )

    def truncated(self) -> dict[str, int]:
        """How many values `truncate=True` cut to their pad length so far, per feature
        (every batch loaded, in every epoch); empty without `truncate=True`.

        Examples:
            >>> source = tfpipe.from_arrays({"tokens": [[1, 2, 3], [4]], "n": [3, 1]})
            >>> loader = tfpipe.SequenceLoader(source, batch_size=2, x="tokens", y="n",
            ...                                pad={"tokens": 2}, truncate=True, shuffle=False)
            >>> loader[0][0].tolist(), loader.truncated()
            ([[1, 2], [4, 0]], {'tokens': 1})
        """
        return self._cuts.counts()

    def _feature_layout(self, name: str, feature: Feature) -> tuple[tuple[int, ...], str]:
        """The shape of one example of a feature in a batch, and the batch dtype."""
        if name in self._pads:
            return self._pads[name].shape, feature.dtype
        if name in self._images or name in self._masks:
            size = self.options.image_size or feature.decoded_shape[:2]
            if size[0] is None or size[1] is None:
                raise SchemaError(
                    f"{name}: {feature.kind}s have no fixed size to batch at; pass "
                    f"image_size=(height, width) or declare {type(feature).__name__}(shape=...). "
                    f"Received: shape={feature.decoded_shape}"
                )
            if name in self._masks:
                return (size[0], size[1], 1)[: len(feature.decoded_shape)], feature.dtype
            return (size[0], size[1], self._images[name].channels), self.options.dtype
        tensor = self.schema.of(Tensor).get(name)
        if tensor is not None and tensor.variable:
            raise SchemaError(
                f"SequenceLoader: feature {name!r} is a list of variable length, and a batch "
                "is one numpy array per feature. Pad it with SequenceLoader(source, "
                f"pad={{{name!r}: length}}), read it with tfpipe.Pipeline(source) (a "
                f"tf.RaggedTensor per batch), or select other features. Received: {feature!r}"
            )
        if name in self.schema.of(Text):
            raise SchemaError(
                f"{name}: {feature!r} has no fixed shape and dtype to batch as a numpy array; "
                "select it with the tf.data pipeline instead"
            )
        shape = tuple(int(d) for d in feature.decoded_shape if d is not None)
        return shape, feature.dtype

    def __len__(self) -> int:
        return self._batches() - self._first_batch

    def _batches(self) -> int:
        batches = self._size / self.options.batch_size
        return math.floor(batches) if self.options.drop_remainder else math.ceil(batches)

    def start_at(self, epoch: int = 0, batch: int = 0) -> SequenceLoader:
        """A loader of the rest of epoch `epoch` from batch `batch`: the batches an
        uninterrupted run has there (the order is a pure function of `(seed, epoch)`; only
        the batches asked for are loaded). It is one epoch long; continue with this loader
        at `epoch + 1` (`loader.epoch = epoch + 1`). `tfpipe.fit(backup_dir=...)` resumes
        with it.

        Examples:
            >>> loader = tfpipe.SequenceLoader(tfpipe.from_directory("images"), batch_size=8,
            ...                                image_size=(32, 32), seed=0)
            >>> rest = loader.start_at(epoch=2, batch=1)
            >>> len(loader), len(rest)
            (3, 2)

        Args:
            epoch: the epoch, from 0. Defaults to 0.
            batch: the first batch of that epoch, from 0. Defaults to 0.
        """
        epoch, batch = check_position(epoch, batch, self._batches())
        rest = copy.copy(self)
        rest.epoch, rest._first_batch, rest._order_cache = epoch, batch, None
        rest._ahead = rest._read_ahead()
        return rest

    def identity(self) -> Identity:
        """What a position of this loader (see `start_at`) is valid for: the source's
        examples (their count, schema and origins: file paths, record locations; for
        `from_tfrecords`, the CRC-32C digests of the shards from their metadata), the batch
        size and the seed.

        Examples:
            >>> source = tfpipe.from_directory("images")
            >>> loader = tfpipe.SequenceLoader(source, batch_size=8, image_size=(32, 32), seed=0)
            >>> identity = loader.identity()
            >>> identity.description, identity.batch_size, identity.seed
            ('DirectorySource of 24 examples', 8, 0)
        """
        origins = [self._origin(i) for i in range(self._size)]
        labels = getattr(self.source, "labels", lambda: None)()
        parts: list[bytes | str] = [type(self.source).__name__, self.schema.to_json(), *origins]
        if labels is not None:
            parts.append(np.asarray(labels).tobytes())
        digests = getattr(self.source, "digests", ())
        if any(digests):  # TFRecord shards: their contents, as their metadata knows them
            parts.append(",".join(digest or "" for digest in digests))
        description = f"{type(self.source).__name__} of {self._size} examples"
        seed = 0 if self.options.seed is None else self.options.seed  # drawn: not reproducible
        return Identity(digest(parts), description, self.options.batch_size, seed)

    def examples_per_epoch(self) -> int:
        """Examples in one epoch: every example of the source, less a dropped partial batch.

        Examples:
            >>> source = tfpipe.from_directory("images")
            >>> loader = tfpipe.SequenceLoader(source, batch_size=10, image_size=(32, 32),
            ...                                drop_remainder=True)
            >>> len(source), loader.examples_per_epoch()
            (24, 20)
        """
        return min(self._size, self._batches() * self.options.batch_size)

    def on_epoch_end(self) -> None:
        """Moves to the next epoch's order (Keras calls this after every epoch).

        Examples:
            >>> loader = tfpipe.SequenceLoader(tfpipe.from_directory("images"),
            ...                                image_size=(32, 32), seed=0)
            >>> first = loader.order().tolist()
            >>> loader.on_epoch_end()
            >>> loader.epoch, loader.order().tolist() == first
            (1, False)
        """
        self.epoch += 1

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The example indices of an epoch (the current one by default), in batch order.

        Examples:
            >>> loader = tfpipe.SequenceLoader(tfpipe.from_directory("images"),
            ...                                image_size=(32, 32), seed=0)
            >>> order = loader.order(epoch=3).tolist()
            >>> sorted(order) == list(range(24)), order == loader.order(3).tolist()
            (True, True)
        """
        epoch = self.epoch if epoch is None else epoch
        cached = self._order_cache
        if cached is None or cached[0] != epoch:
            if self.options.shuffle:
                rng = np.random.default_rng((self._seed, epoch))
                indices = rng.permutation(self._size)
            else:
                indices = np.arange(self._size)
            cached = (epoch, indices)
            self._order_cache = cached
        return cached[1]

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        """Batch `index` of the current epoch: `(x, y)`, or `(x,)` when `y` is None."""
        count = len(self)
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"batch indices must be ints, got {type(index).__name__}")
        if not -count <= index < count:
            raise IndexError(f"batch {index} is out of range for a loader of {count} batches")
        index, epoch = int(index) % count, self.epoch
        loaded = None if self._ahead is None else self._ahead.take(epoch, index)
        return self._batch(epoch, index) if loaded is None else loaded

    def _batch(self, epoch: int, index: int) -> tuple[Any, ...]:
        """Batch `index` (from 0) of `epoch`."""
        start = (index + self._first_batch) * self.options.batch_size
        return self._load(self.order(epoch)[start : start + self.options.batch_size], epoch)

    def _load(self, indices: np.ndarray, epoch: int) -> tuple[Any, ...]:
        """The batch of the examples `indices` in `epoch` (which seeds the transform)."""
        examples = [self.source[int(index)] for index in indices]
        # Not in a forked worker process: TensorFlow's runtime, inherited from the parent, must
        # not run there; `Image.load` decodes with Pillow (the same pixels within 1/255).
        forked = worker_processes.forked_runtime()
        images = {} if forked else self._decoder.images_together(examples, self._graph_rescale)
        batches = images if self._graph_batches else {}
        arrays = {
            name: batches[name]
            if name in batches
            else aligned_empty((len(indices), *self._batch_shapes[name]), dtype)
            for name, (_, dtype) in self._layout.items()
        }
        for position, (index, example) in enumerate(zip(indices, examples, strict=True)):
            self._fill(
                arrays, position, index=int(index), example=example, epoch=epoch, images=images
            )
        x = pick(arrays, self.x or ())
        return (x,) if self.y is None else (x, pick(arrays, self.y))

    def _example_decoder(self) -> ExampleDecoder:
        """Decodes the features `_layout` holds, images and masks at their layout's size."""
        sized = self._images.keys() | self._masks.keys()
        sizes = {
            name: (shape[0], shape[1]) if name in sized else None
            for name, (shape, _) in self._layout.items()
        }
        return ExampleDecoder(self.schema, sizes, self.options.reduced_decode)

    def _origin(self, index: int) -> str:
        return origin_of(self.source, index)

    def _fill(
        self,
        arrays: dict[str, np.ndarray],
        position: int,
        index: int,
        example: Mapping[str, Any],
        epoch: int,
        images: dict[str, np.ndarray],
    ) -> None:
        """Loads example `index` into row `position` of the batch arrays (its images from
        `images` when they were decoded together; those are the batches themselves with
        `_graph_batches`)."""
        row = {name: batch[position] for name, batch in images.items()}
        values = self._decoder.load(example, row, lambda: self._origin(index))
        self._pad(values, index)
        if self.transform is not None:
            rng = np.random.default_rng((self._seed, epoch, index))
            try:
                transformed = self.transform(values, rng)
            except Exception as e:
                raise DecodeError(
                    f"transform failed on {self._origin(index)}: {type(e).__name__}: {e}"
                ) from e
            if not isinstance(transformed, Mapping):
                raise DecodeError(
                    f"transform must return the example dict, got {type(transformed).__name__} "
                    f"for {self._origin(index)}"
                )
            values = dict(transformed)
        for name, shape in self._batch_shapes.items():
            if self._graph_batches and name in images:
                continue
            value: Any = values.get(name)
            if np.shape(value) != shape:
                raise DecodeError(
                    f"{name}: expected shape {shape}, got {np.shape(value)} in "
                    f"{self._origin(index)}" + (" after transform" if self.transform else "")
                )
            out = arrays[name]
            if self._scale is not None and name in self._images:
                np.multiply(
                    value, self._scale, out=out[position], dtype=out.dtype, casting="unsafe"
                )
            else:
                out[position] = value

    def _pad(self, values: dict[str, Any], index: int) -> None:
        """Pads the lists of example `index` in `values` (as `Pipeline(pad=...)` does), counting
        the values cut."""
        for name in [name for name in self._layout if name in self._pads]:
            try:
                values[name], cut = self._pads[name].one(values[name])
            except ValueError as e:
                raise DecodeError(f"{e} in {self._origin(index)}") from e
            if cut:
                self._cuts.add(name)

    def build_distributed(self, strategy: tf.distribute.Strategy | None = None) -> DistributedFeed:
        """The batches for training under a `tf.distribute` strategy, each worker on its part.

        `batch_size` is the global batch of one step. Every worker computes the same order of
        each epoch (so `seed` must be given when shuffling) and loads only its slice of each
        global batch, in `workers` threads, split evenly over its replicas. An epoch is
        `len(source) // batch_size` steps on every worker; the examples of a last partial
        batch are left out of the epoch (other ones every epoch when shuffling), with a
        `TfpipeWarning` counting them. `tfpipe.fit` calls this itself for a model built under
        a multi-replica strategy. A loader from `start_at(epoch, batch)` starts at step
        `batch` of `epoch` (global steps, the same on every worker) and goes on with the next
        epochs.

        Examples:
            >>> strategy = tf.distribute.MirroredStrategy(["/cpu:0"])  # or MultiWorkerMirrored...
            >>> loader = tfpipe.SequenceLoader(tfpipe.from_directory("images"), batch_size=8,
            ...                                image_size=(32, 32), seed=0)
            >>> data = loader.build_distributed(strategy)
            >>> data.steps_per_epoch, data.global_batch_size
            (3, 8)
            >>> rest = loader.start_at(epoch=1, batch=2).build_distributed(strategy)

        Args:
            strategy: the strategy the model was built under. Defaults to None (the current
                one, `tf.distribute.get_strategy()`).
        """
        loader = DistributableLoader(
            options=self.options,
            size=self._size,
            first_epoch=self.epoch,
            first_batch=self._first_batch,
            order=self.order,
            load=self._load,
            signature=self._batch_signature(),
        )
        return distribute_loader(loader, strategy or tf.distribute.get_strategy())

    def _batch_signature(self) -> Any:
        """The `tf.TensorSpec`s of one batch, as `loader[i]` gives it (batch dimension None)."""
        specs = {
            name: tf.TensorSpec((None, *self._batch_shapes[name]), tf.as_dtype(dtype))
            for name, (_, dtype) in self._layout.items()
        }
        x = pick(specs, self.x or ())
        return (x,) if self.y is None else (x, pick(specs, self.y))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_order_cache"] = state["_ahead"] = None  # threads and locks stay here
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._ahead = self._read_ahead()
