"""`tfpipe.Pipeline`: say what the input should do; get the fast `tf.data` graph.

Whatever order the builder methods are called in, `build()` emits the stages in the order the
tf.data performance guide recommends::

    file list shuffle -> interleaved parallel reads -> record shuffle (serialized bytes, cheap)
    -> batch -> vectorised parse_example -> per-element decode/resize (parallel map)
    -> cache (after deterministic decoding, before random maps) -> user maps (parallel)
    -> batch -> as_supervised -> prefetch(AUTOTUNE)

With maps and no cache, images are decoded after the unbatch the maps need, one example at a
time in the first map's parallel calls (JPEG orientations read per batch before it), rather
than in a `tf.map_fn` over each batch.

`explain()` returns that plan, one stage per line.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import keras
import tensorflow as tf

from tfpipe._checks import check_image_size, check_int, check_positive, is_int
from tfpipe.errors import SchemaError, TfpipeWarning
from tfpipe.loaders.inputs import (
    AUTOTUNE,
    Decoding,
    MemoryInput,
    PyDatasetInput,
    RecordInput,
    Stage,
)
from tfpipe.loaders.padding import Padding
from tfpipe.loaders.supervised import Names, check_known, feature_names, selector
from tfpipe.records.checker import Fault
from tfpipe.schema import Schema

_DEFAULT_BATCH = 64
_RECORD_BUFFER = 4096
# Large buffers of large records (raw pixels) are slow to sample from: 4096 records of 48 KiB
# ran at half the speed of 1024. The record buffer holds at most this many bytes.
_RECORD_BUFFER_BYTES = 32 * 2**20
_MIN_RECORD_BUFFER = 256
_EXAMPLE_BUFFER = 1024


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """`tf.data.Options` the pipeline sets; see `Pipeline.options`."""

    deterministic: bool | None = None
    ram_budget_mb: int | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.deterministic not in (None, True, False):
            raise ValueError(
                f"deterministic must be True, False or None. Received: {self.deterministic!r}"
            )
        if self.ram_budget_mb is not None:
            check_int("ram_budget_mb", self.ram_budget_mb)
        if self.threads is not None:
            check_int("threads", self.threads)


@dataclasses.dataclass(frozen=True)
class _Transform:
    kind: str  # "map" or "filter"
    fn: Callable[..., Any]
    random: bool | None

    @property
    def name(self) -> str:
        return f"{self.kind}({getattr(self.fn, '__name__', type(self.fn).__name__)})"

    @property
    def _map_dataset(self) -> Callable[..., tf.data.Dataset] | None:
        # A map with its own map_dataset (tfpipe.augment.Joint) zips a seed onto each example.
        map_dataset = getattr(self.fn, "map_dataset", None)
        return map_dataset if callable(map_dataset) else None

    def takes_prepare(self) -> bool:
        """Whether `apply` can run a `prepare` function in the same parallel call: a map, or
        a `map_dataset` with a `prepare` argument (as `tfpipe.augment.Joint` has)."""
        if self.kind != "map":
            return False
        map_dataset = self._map_dataset
        return map_dataset is None or "prepare" in inspect.signature(map_dataset).parameters

    def apply(
        self, dataset: tf.data.Dataset, prepare: Callable[[Any], Any] | None = None
    ) -> tf.data.Dataset:
        """Applies the function, checking that it keeps the structure of the examples;
        `prepare` first turns each element into the example, in the same call."""
        if self.kind == "filter":
            try:
                return dataset.filter(self.fn)
            except (TypeError, ValueError) as e:
                raise SchemaError(f"{self.name} must return a scalar bool tensor: {e}") from e
        before = dataset.element_spec if prepare is None else dataset.element_spec[0]
        map_dataset = self._map_dataset
        if map_dataset is not None:
            dataset = map_dataset(dataset) if prepare is None else map_dataset(dataset, prepare)
        else:
            fn = self.fn if prepare is None else (lambda *parts: self.fn(prepare(parts)))
            dataset = dataset.map(fn, num_parallel_calls=AUTOTUNE)
        after = dataset.element_spec
        if isinstance(before, Mapping) and not isinstance(after, Mapping):
            raise SchemaError(
                f"{self.name} must return a dict of feature name -> tensor like its input "
                f"(features {sorted(before)}); got {type(after).__name__}. Keep examples as "
                "dicts and use as_supervised(x, y) to make (x, y) pairs"
            )
        if isinstance(before, tuple) and not isinstance(after, tuple):
            raise SchemaError(
                f"{self.name} must return a tuple like its input ({len(before)} parts); "
                f"got {type(after).__name__}"
            )
        return dataset

    def is_random(self, spec: Any) -> bool:
        """`random` as given or as `fn.random` says, else whether the traced function uses
        random ops."""
        declared = self.random if self.random is not None else getattr(self.fn, "random", None)
        if isinstance(declared, bool):
            return declared
        args = spec if isinstance(spec, tuple) else (spec,)
        graph = tf.function(self.fn).get_concrete_function(*args).graph.as_graph_def()
        ops = [n.op for n in graph.node] + [
            n.op for f in graph.library.function for n in f.node_def
        ]
        return any("Random" in op for op in ops)


class Pipeline:
    """Builds a fast `tf.data.Dataset` from TFRecords, a folder, a DataFrame, arrays or a
    `keras.utils.PyDataset`.

    Builder methods return a new pipeline, so one base can feed several variants. Examples are
    dicts of feature name -> tensor (a PyDataset's own structure is kept); images are uint8
    unless `rescale` is given; masks (`tfpipe.Mask`) keep their integer values.

    Example:
        >>> ds = (tfpipe.Pipeline("out/train", image_size=(128, 128), rescale=1 / 255)
        ...       .shuffle(seed=0).batch(64).as_supervised("image", "label").build())
        >>> model.fit(ds, epochs=3)

    Args:
        source: a TFRecord dataset prefix (with its metadata file), a file, a glob, a folder of
            shards or a list of files; a `tfpipe.from_directory` / `from_dataframe` /
            `from_arrays` source (or a split of one); or a `keras.utils.PyDataset`.
        schema: the record schema for TFRecords without a metadata file. Defaults to None.
        image_size: resize every image (bilinear) and every mask (nearest neighbour, so they
            stay aligned) to `(height, width)`. Defaults to None (the size the schema declares).
        reduced_decode: decode JPEGs larger than twice `image_size` at a reduced DCT scale
            (1/2, 1/4, 1/8) before resizing: much faster, but pixels differ slightly from a
            full decode + resize. Defaults to False.
        rescale: cast `Image` features to float32 and multiply by this finite number > 0
            (e.g. `1 / 255`); masks are never rescaled. Defaults to None (uint8 images).
        compression: None, "gzip" or "zlib" for TFRecords. Defaults to "auto" (from the
            metadata, else the file suffix and first bytes).
        pad: feature name -> length: read these variable-length `Tensor(shape=(None, ...))`
            features as dense tensors of that many rows, filled with `pad_value`; a longer
            value fails with an error naming the feature. Defaults to None (variable-length
            features are `tf.RaggedTensor`s).
        pad_value: the value padding fills in. Defaults to 0.
        truncate: cut values longer than their pad length to their first rows instead of
            failing; `truncated()` counts them (and `tfpipe.fit` warns). Defaults to False.
    """

    def __init__(
        self,
        source: Any,
        *,
        schema: Any = None,
        image_size: tuple[int, int] | None = None,
        reduced_decode: bool = False,
        rescale: float | None = None,
        compression: str | None = "auto",
        pad: Mapping[str, int] | None = None,
        pad_value: float = 0,
        truncate: bool = False,
    ) -> None:
        image_size = check_image_size("image_size", image_size)
        rescale = check_positive("rescale", rescale, or_none=True)
        self._decoding = Decoding(image_size, bool(reduced_decode), rescale)
        self._input = _make_input(source, schema, compression)
        if truncate not in (True, False) or (truncate and pad is None):
            raise ValueError(
                "truncate must be True or False, and applies with pad={name: length}. "
                f"Received: truncate={truncate!r}, pad={pad!r}"
            )
        self._padding = Padding(pad, pad_value, bool(truncate), self._input.schema)
        self._seed: int | None = None
        self._shuffle = False
        self._buffer: int | None = None
        self._transforms: tuple[_Transform, ...] = ()
        self._batch: tuple[int, bool] | None = None
        self._cache: tuple[str, int] | None = None
        self._prefetch: int = AUTOTUNE
        self._repeat: int | None = 0
        self._take: int | None = None
        self._shard: tuple[int, int] | None = None
        self._options = PipelineOptions()
        self._supervised: tuple[Any, Any] | None = None

    def _with(self, **changes: Any) -> Pipeline:
        new = copy.copy(self)
        for name, value in changes.items():
            setattr(new, f"_{name}", value)
        return new

    def shuffle(self, seed: int | None = None, buffer_size: int | None = None) -> Pipeline:
        """Shuffles files and records, differently every epoch; reproducibly with a seed.

        Records are shuffled as serialized bytes or indices, before decoding, which is cheap.
        After a `cache()`, decoded examples are shuffled instead (cached batch order, then a
        buffer of examples), so every epoch still differs.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").shuffle(seed=0).batch(32).build()

        Args:
            seed: makes the order reproducible (and the pipeline deterministic). Defaults to
                None (a fresh order each run, `deterministic=False` for speed).
            buffer_size: the shuffle buffer, in records. Defaults to every record for in-memory
                sources; for TFRecords min(examples, 4096, as many as fit in 32 MiB but at
                least 256) (the writer already shuffled globally); 1024 decoded examples after
                a cache.
        """
        if seed is not None:
            check_int("seed", seed, minimum=0)
        if buffer_size is not None:
            check_int("buffer_size", buffer_size)
        return self._with(shuffle=True, seed=seed, buffer=buffer_size)

    def map(self, fn: Callable[..., Any], *, random: bool | None = None) -> Pipeline:
        """Applies `fn` to every example (a dict of tensors) in a parallel map (AUTOTUNE).

        A map is *random* (an augmentation) when its output changes between calls: a cache is
        never placed after one. `random=None` decides by tracing `fn` and looking for random
        ops (`tf.random.*`, `tf.image.random_*`, Keras random layers); pass True or False to
        say it yourself (e.g. for randomness from `tf.py_function`).

        Example:
            >>> flip = lambda ex: {**ex, "image": tf.image.random_flip_left_right(ex["image"])}
            >>> ds = tfpipe.Pipeline("out/train").map(flip).batch(32).build()

        An object with a `map_dataset(dataset)` method maps the dataset itself: a
        `tfpipe.augment.Joint` zips a seed onto every example, so that its random flips and
        crops are reproducible in a parallel map; its `random` attribute says whether it is
        random.

        Args:
            fn: example dict -> example dict, or an object with `map_dataset`.
            random: whether `fn` is random. Defaults to None (`fn.random` if it has one, else
                detected).
        """
        return self._add_transform("map", fn, random)

    def filter(self, predicate: Callable[..., Any]) -> Pipeline:
        """Keeps the examples for which `predicate(example)` is a True scalar bool tensor.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").filter(lambda ex: ex["label"] < 5).build()
        """
        return self._add_transform("filter", predicate, False)

    def _add_transform(self, kind: str, fn: Any, random: bool | None) -> Pipeline:
        if not callable(fn):
            raise TypeError(f"{kind}() needs a function. Received: {fn!r}")
        if random not in (None, True, False):
            raise ValueError(f"random must be True, False or None. Received: {random!r}")
        return self._with(transforms=(*self._transforms, _Transform(kind, fn, random)))

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Pipeline:
        """Groups examples into batches of `batch_size`.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").batch(64, drop_remainder=True).build()

        Args:
            batch_size: examples per batch.
            drop_remainder: drop a last, smaller batch. Defaults to False.
        """
        return self._with(batch=(check_int("batch_size", batch_size), bool(drop_remainder)))

    def cache(self, path: str | os.PathLike[str] = "") -> Pipeline:
        """Caches decoded examples in memory, or in files at `path`.

        The cache goes where this call is among `map()`s, but never after a random map (that
        would freeze the augmentation): then it moves before it, with a `TfpipeWarning`.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").cache().map(augment, random=True).build()

        Args:
            path: a file prefix for an on-disk cache. Defaults to "" (memory).
        """
        path = os.fspath(path)
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise ValueError(
                f"cache path {path!r}: the folder {os.path.dirname(path)!r} is missing"
            )
        return self._with(cache=(path, len(self._transforms)))

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Pipeline:
        """Sets the prefetch buffer of the last stage (always present). Defaults to AUTOTUNE."""
        if buffer_size != AUTOTUNE:
            check_int("buffer_size", buffer_size)
        return self._with(prefetch=buffer_size)

    def repeat(self, count: int | None = None) -> Pipeline:
        """Repeats the data `count` times (forever with None), reshuffling every pass.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").shuffle(seed=0).repeat().batch(64).build()
        """
        if count is not None:
            check_int("count", count)
        return self._with(repeat=count)

    def take(self, count: int) -> Pipeline:
        """Keeps `count` examples (not batches) per epoch, taken before any cache.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").take(100).batch(10).build()
        """
        check_int("count", count)
        return self._with(take=count)

    def shard(self, num: int, index: int) -> Pipeline:
        """Keeps shard `index` of `num` for one of `num` workers: by file when there are at
        least `num` TFRecord files, else by record. Together the shards see each example once.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").shard(2, 0).batch(64).build()
        """
        check_int("num", num)
        if not is_int(index) or not 0 <= index < num:
            raise ValueError(f"index must be an int in [0, {num}). Received: index={index!r}")
        return self._with(shard=(num, index))

    def options(
        self,
        *,
        deterministic: bool | None = None,
        ram_budget_mb: int | None = None,
        threads: int | None = None,
    ) -> Pipeline:
        """tf.data options: output order, autotune RAM budget, private thread pool size.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").options(deterministic=False, threads=4).build()

        Args:
            deterministic: keep a fixed output order. Defaults to None (True with a shuffle
                seed, else False for throughput).
            ram_budget_mb: RAM autotune may use for buffers, in MB. Defaults to None (TF's).
            threads: size of a private thread pool. Defaults to None (TF's shared pool).
        """
        return self._with(options=PipelineOptions(deterministic, ram_budget_mb, threads))

    def as_supervised(self, x: Names | None = None, y: Names | None = None) -> Pipeline:
        """Yields `(x, y)` pairs for `model.fit`, following Keras's conventions: a list of names
        gives a tuple of tensors (multi-input or multi-output models, in the model's order), a
        dict of model input/output name -> feature name gives a dict (matched by name).

        Example:
            >>> ds = tfpipe.Pipeline(src).batch(32).as_supervised("image", ["weather", "ground"])

        Args:
            x: the input feature name(s).
            y: the target feature name(s).
        """
        feature_names("x", x, "as_supervised")
        feature_names("y", y, "as_supervised")
        schema = self._input.schema
        if schema is not None and not self._transforms:
            check_known(x, y, schema, "as_supervised", "the schema")
        return self._with(supervised=(x, y))

    @property
    def supervised(self) -> tuple[Names, Names] | None:
        """The `(x, y)` given to `as_supervised`; None when the pipeline yields example dicts.

        Example:
            >>> tfpipe.Pipeline("out/train").as_supervised("image", "label").supervised
            ('image', 'label')
        """
        return self._supervised

    @property
    def schema(self) -> Schema | None:
        """The schema of what the pipeline reads; None for a `keras.utils.PyDataset` source.

        Example:
            >>> tfpipe.Pipeline("out/train").schema["image"].encoding
            'jpeg'
        """
        return getattr(self._input, "schema", None)

    @property
    def batch_size(self) -> int | None:
        """The size of the batches `batch()` asked for; None without a `batch()`.

        The last batch of an epoch may be smaller (unless `drop_remainder=True`); every other
        batch has this size, whatever order a non-deterministic pipeline yields them in.

        Example:
            >>> tfpipe.Pipeline("out/train").batch(64).batch_size
            64
        """
        return None if self._batch is None else self._batch[0]

    def examples_per_epoch(self) -> int | None:
        """Examples in one pass over the data (ignoring `repeat()`), known from the metadata.

        None when it cannot be known without reading the data: a filter(), a shard(), or a
        source of unknown size. Examples dropped with a partial last batch do not count.

        Example:
            >>> tfpipe.Pipeline("out/train").batch(64, drop_remainder=True).examples_per_epoch()
            3968
        """
        count = self._input.num_examples
        filtered = any(t.kind == "filter" for t in self._transforms)
        if count is None or filtered or self._shard is not None:
            return None
        count = count if self._take is None else min(count, self._take)
        if self._batch is not None and self._batch[1]:
            count -= count % self._batch[0]
        return int(count)

    def locate_fault(self) -> Fault | None:
        """The first damaged record or image file of the source; None when all are sound.

        tf.data reports damaged data with TensorFlow's errors, which name no file and no
        record. This reads the source again, checking what `tfpipe.verify` checks (frames,
        Examples, features and images decoded as this pipeline decodes them), until the first
        fault. `tfpipe.named_errors` calls it to turn such an error into a `DecodeError`.

        Example:
            >>> fault = tfpipe.Pipeline("out/train").locate_fault()
            >>> print(fault)
            record 17 of out/train-00003-of-00008.tfrecord: damaged or truncated frame: ...
        """
        return self._input.locate_fault(self._decoding)

    def truncated(self) -> dict[str, int]:
        """How many values `truncate=True` cut to their pad length so far, per feature.

        Counted as examples are read (one read twice counts twice), by this pipeline and every
        variant built from the same `Pipeline(...)`; empty without `truncate=True`.

        Example:
            >>> p = tfpipe.Pipeline("out/reviews", pad={"tokens": 128}, truncate=True).batch(32)
            >>> batches = list(p.build())
            >>> p.truncated()
            {'tokens': 17}
        """
        return self._padding.truncated()

    def batches_per_epoch(self) -> int | None:
        """Batches in one pass over the data (ignoring `repeat()`), known from the metadata.

        None when it cannot be known without reading the data: no batch(), a filter(), a
        shard(), or a source of unknown size. `tfpipe.fit` uses it to size repeated epochs.

        Example:
            >>> tfpipe.Pipeline("out/train").batch(64).batches_per_epoch()  # 4,000 examples
            63
        """
        count = self.examples_per_epoch()
        if count is None or self._batch is None:
            return None
        return math.ceil(count / self._batch[0])

    def explain(self) -> str:
        """The plan `build()` runs, one stage per line, in order.

        Example:
            >>> print(tfpipe.Pipeline("out/train").batch(64).shuffle(seed=0).explain())
        """
        _, labels = self._assemble()
        return "\n".join(f"{i:2d}. {label}" for i, label in enumerate(labels, 1))

    def build(self) -> tf.data.Dataset:
        """The `tf.data.Dataset`, ready for `model.fit`.

        Example:
            >>> ds = tfpipe.Pipeline("out/train").batch(64).build()
        """
        dataset, _ = self._assemble()
        return dataset

    def _assemble(self) -> tuple[tf.data.Dataset, list[str]]:
        assembly = _Assembly()
        inp = self._input
        deterministic = self._options.deterministic
        det = self._seed is not None if deterministic is None else deterministic
        cached = self._cache is not None
        stages, by_record = inp.read(self._shard, self._seed, self._shuffle and not cached, det)
        assembly.run_all(stages)
        if self._shard is not None and by_record:
            num, index = self._shard
            assembly.run(f"shard records {index} of {num}", lambda ds: ds.shard(num, index))
        if self._take is not None and not inp.decoded:
            assembly.run(f"take {self._take} examples", lambda ds: ds.take(self._take))
        if not cached:
            self._shuffle_and_repeat(assembly, self._record_buffer(), "records")
        if isinstance(inp, PyDatasetInput):
            assembly.run_all(inp.loader(det))
            if self._take is not None:
                assembly.run(f"take {self._take} examples", lambda ds: ds.take(self._take))
        else:
            stays = not self._transforms and not (cached and self._shuffle)
            size, drop = self._batch or (_DEFAULT_BATCH, False)
            drop = drop and stays
            assembly.run(
                f"batch {size} records" + (" (drop remainder)" if drop else ""),
                lambda ds: ds.batch(size, drop_remainder=drop),
            )
            # Maps unbatch the examples anyway: then images are decoded one example at a time,
            # in the first map's calls (same CPU time as a tf.map_fn per batch, more cores busy).
            defer = (
                isinstance(inp, RecordInput)
                and bool(self._transforms)
                and not cached
                and inp.defers_images()
            )
            decoder = inp.decoder(self._decoding, defer_images=True) if defer else None
            decoder = decoder or inp.decoder(self._decoding)
            assembly.run_all([decoder, *self._padding.stages])
            assembly.batched = True
            if defer:
                orient, label, decode = inp.image_decoders(self._decoding)
                assembly.run(*orient)
                assembly.unbatch()
                if self._transforms[0].takes_prepare():  # one parallel map instead of two
                    assembly.prepare = decode
                    name = self._transforms[0].name
                    assembly.run(f"{label}, in the parallel calls of {name}", lambda ds: ds)
                else:
                    decode_pair = lambda *pair: decode(pair)  # noqa: E731
                    assembly.run(
                        f"{label} (parallel, AUTOTUNE)",
                        lambda ds: ds.map(decode_pair, num_parallel_calls=AUTOTUNE),
                    )
        self._transforms_and_cache(assembly)
        if self._batch is not None and not assembly.batched:
            size, drop = self._batch
            assembly.run(
                f"batch {size}" + (" (drop remainder)" if drop else ""),
                lambda ds: ds.batch(size, drop_remainder=drop),
            )
        elif self._batch is None and assembly.batched:
            assembly.unbatch()
        if self._supervised is not None:
            self._supervise(assembly)
        batches = self.batches_per_epoch()
        if batches is not None and self._repeat == 0:
            # Keras then shows the epoch's length and never stops on "input ran out of data";
            # a dataset that does not hold what its metadata says fails instead of shrinking.
            assembly.run(
                f"declare {batches} batches per epoch (from the example count)",
                lambda ds: ds.apply(tf.data.experimental.assert_cardinality(batches)),
            )
        label = "AUTOTUNE" if self._prefetch == AUTOTUNE else str(self._prefetch)
        assembly.run(f"prefetch {label}", lambda ds: ds.prefetch(self._prefetch))
        assembly.run(f"options: deterministic={det}", lambda ds: self._apply_options(ds, det))
        return assembly.dataset, assembly.labels

    def _record_buffer(self) -> int:
        inp = self._input
        if isinstance(inp, PyDatasetInput):
            return inp.count
        if isinstance(inp, MemoryInput):
            return self._buffer or inp.num_examples
        by_bytes = max(_MIN_RECORD_BUFFER, int(_RECORD_BUFFER_BYTES // max(1, inp.record_bytes)))
        return self._buffer or min(inp.num_examples or _RECORD_BUFFER, _RECORD_BUFFER, by_bytes)

    def _shuffle_and_repeat(self, assembly: _Assembly, buffer: int, what: str) -> None:
        if self._shuffle:
            assembly.run(
                f"shuffle {what} (buffer {buffer}, seed={self._seed}, reshuffled each epoch)",
                lambda ds: ds.shuffle(buffer, seed=self._seed, reshuffle_each_iteration=True),
            )
        if self._repeat != 0:
            times = "forever" if self._repeat is None else f"{self._repeat} times"
            assembly.run(f"repeat {times}", lambda ds: ds.repeat(self._repeat))

    def _transforms_and_cache(self, assembly: _Assembly) -> None:
        pending = self._cache
        for position, transform in enumerate((*self._transforms, None)):
            if pending is not None:
                path, asked_at = pending
                random = transform is not None and transform.is_random(assembly.spec())
                if position == asked_at or random:
                    if position < asked_at:
                        warnings.warn(
                            f"cache() was asked for after the random {transform.name} "  # type: ignore[union-attr]
                            "(caching would freeze its output); the cache is placed before it",
                            TfpipeWarning,
                            stacklevel=4,
                        )
                    self._place_cache(assembly, path)
                    pending = None
            if transform is None:
                break
            assembly.unbatch()
            parallel = " (parallel, AUTOTUNE)" if transform.kind == "map" else ""
            prepare, assembly.prepare = assembly.prepare, None
            apply = functools.partial(transform.apply, prepare=prepare)
            assembly.run(transform.name + parallel, apply)

    def _place_cache(self, assembly: _Assembly, path: str) -> None:
        assembly.run(f"cache ({path or 'memory'})", lambda ds: ds.cache(path))
        if self._shuffle and assembly.batched:
            known = self._input.num_examples
            size = (self._batch or (_DEFAULT_BATCH, False))[0]
            batches = math.ceil(known / size) if known else _EXAMPLE_BUFFER
            assembly.run(
                f"shuffle cached batches (buffer {batches}, seed={self._seed})",
                lambda ds: ds.shuffle(batches, seed=self._seed),
            )
        if self._shuffle:
            assembly.unbatch()
        buffer = self._buffer or min(self._input.num_examples or _EXAMPLE_BUFFER, _EXAMPLE_BUFFER)
        self._shuffle_and_repeat(assembly, buffer, "decoded examples")

    def _supervise(self, assembly: _Assembly) -> None:
        x, y = self._supervised  # type: ignore[misc]
        spec = assembly.spec()
        if not isinstance(spec, Mapping):
            raise SchemaError(
                "as_supervised: the examples are not a dict of named features "
                f"(got {type(spec).__name__}); a PyDataset already yields (x, y)"
            )
        check_known(x, y, sorted(spec), "as_supervised", "the examples")
        assembly.run(f"as_supervised x={x!r}, y={y!r}", lambda ds: ds.map(selector(x, y)))

    def _apply_options(self, dataset: tf.data.Dataset, deterministic: bool) -> tf.data.Dataset:
        options = tf.data.Options()
        options.deterministic = deterministic
        if self._options.ram_budget_mb is not None:
            options.autotune.ram_budget = self._options.ram_budget_mb << 20
        if self._options.threads is not None:
            options.threading.private_threadpool_size = self._options.threads
        return dataset.with_options(options)


class _Assembly:
    """The dataset under construction and the label of every stage applied to it."""

    def __init__(self) -> None:
        self.dataset: Any = None
        self.labels: list[str] = []
        self.batched = False
        self.prepare: Callable[[Any], Any] | None = None  # for the next map's calls

    def run(self, label: str, stage: Callable[[Any], tf.data.Dataset]) -> None:
        self.dataset = stage(self.dataset)
        self.labels.append(label)

    def run_all(self, stages: list[Stage]) -> None:
        for label, stage in stages:
            self.run(label, stage)

    def unbatch(self) -> None:
        if self.batched:
            self.run("unbatch", lambda ds: ds.unbatch())
            self.batched = False

    def spec(self) -> Any:
        return self.dataset.element_spec


def _make_input(source: Any, schema: Any, compression: str | None) -> Any:
    if isinstance(source, str | os.PathLike | list | tuple):
        if isinstance(source, list | tuple) and not source:
            raise ValueError("source: the list of TFRecord files is empty")
        return RecordInput(source, schema, compression)
    if schema is not None:
        raise ValueError(
            "schema= applies to TFRecord sources only; a tfpipe source carries its own schema"
        )
    if isinstance(source, keras.utils.PyDataset):
        return PyDatasetInput(source)
    return MemoryInput(source)
