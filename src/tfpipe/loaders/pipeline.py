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
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import keras
import tensorflow as tf

from tfpipe import fs
from tfpipe.checks import check_image_size, check_int, check_positive, is_int
from tfpipe.distribute.sharding import (
    DistributedInput,
    Layout,
    distribute,
    file_split,
    record_split,
)
from tfpipe.errors import SchemaError, SourceError, TfpipeWarning
from tfpipe.format.lookup import with_split
from tfpipe.loaders.inputs import (
    AUTOTUNE,
    Decoding,
    MemoryInput,
    PyDatasetInput,
    RecordInput,
    Stage,
    plain,
)
from tfpipe.loaders.padding import Padding
from tfpipe.loaders.position import Identity, check_position, digest
from tfpipe.loaders.service import DataService
from tfpipe.loaders.supervised import Names, check_known, feature_names, selector
from tfpipe.records.reader import NamedDataset
from tfpipe.records.verification import Fault, from_input, named_error
from tfpipe.schema import Schema

_DEFAULT_BATCH = 64
_RECORD_BUFFER = 4096
# Large buffers of large records (raw pixels) are slow to sample from: 4096 records of 48 KiB
# ran at half the speed of 1024. The record buffer holds at most this many bytes.
_RECORD_BUFFER_BYTES = 32 * 2**20
_MIN_RECORD_BUFFER = 256
_EXAMPLE_BUFFER = 1024
_FOREVER = 2**62  # the epoch a pipeline repeated forever never reaches
_SEED_TENSOR = re.compile(r"seed=Tensor\(.*?dtype=\w+\)")


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

    Examples:
        >>> ds = (tfpipe.Pipeline("out/train", image_size=(32, 32), rescale=1 / 255)
        ...       .shuffle(seed=0).batch(8).as_supervised("image", "label").build())
        >>> history = model.fit(ds, epochs=2, verbose=0)
        >>> len(history.history["loss"])
        2

    Args:
        source: a TFRecord dataset prefix (with its metadata file), a file, a glob, a folder of
            shards or a list of files (local, or URLs TensorFlow opens: "gs://b/train"); a
            `tfpipe.from_directory` / `from_dataframe` / `from_arrays` source (or a split of
            one); or a `keras.utils.PyDataset`.
        schema: the record schema for TFRecords without a metadata file. Defaults to None.
        image_size: resize every image (bilinear, antialiased when shrinking) and every mask
            (nearest neighbour, so they stay aligned) to `(height, width)`. Defaults to None
            (the size the schema declares).
        reduced_decode: decode JPEGs at least twice `image_size` in both sides at the
            smallest DCT scale (1/2, 1/4, 1/8) that still covers it before resizing, as
            `SequenceLoader` and the writer do (the same pixels on every path); False decodes
            in full: slower, finer, and then the other paths need it too. Defaults to True.
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
        split: the split to read when `source` is a folder: a split of a prepared TensorFlow
            Datasets folder ("train"; or pass the path `.../mnist-train`), or the name of a
            tfpipe dataset prefix in the folder. Defaults to None (the folder's only TFDS
            split; every TFRecord file of another folder).
    """

    def __init__(
        self,
        source: Any,
        *,
        schema: Any = None,
        image_size: tuple[int, int] | None = None,
        reduced_decode: bool = True,
        rescale: float | None = None,
        compression: str | None = "auto",
        pad: Mapping[str, int] | None = None,
        pad_value: float = 0,
        truncate: bool = False,
        split: str | None = None,
    ) -> None:
        image_size = check_image_size("image_size", image_size)
        rescale = check_positive("rescale", rescale, or_none=True)
        self._decoding = Decoding(image_size, bool(reduced_decode), rescale)
        self._input = _make_input(with_split(source, split), schema, compression)
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
        self._start: tuple[int, int] | None = None
        self._epoch_batches: int | None = None  # build_distributed's steps of a worker's epoch
        self._service: DataService | None = None

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

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").shuffle(seed=0).batch(8).build()
            >>> [int(n) for n in next(iter(ds))["label"]]  # the classes mixed
            [2, 2, 0, 0, 1, 2, 1, 1]

        Args:
            seed: makes the order reproducible (and the pipeline deterministic). As with any
                tf.data seed, the order also depends on TensorFlow's global seed
                (`keras.utils.set_random_seed`); after `start_at` it depends on (seed, epoch)
                alone. Defaults to None (a fresh order each run, `deterministic=False` for
                speed: parallel stages yield elements as they finish).
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

        Examples:
            >>> flip = lambda ex: {**ex, "image": tf.image.random_flip_left_right(ex["image"])}
            >>> ds = tfpipe.Pipeline("out/train").map(flip).batch(8).build()
            >>> next(iter(ds))["image"].shape
            TensorShape([8, 32, 32, 3])

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

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").filter(lambda ex: ex["label"] < 2).build()
            >>> sum(1 for _ in ds)  # 2 classes of 8 images
            16
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

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").batch(10, drop_remainder=True).build()
            >>> [len(batch["label"]) for batch in ds]  # 24 examples
            [10, 10]

        Args:
            batch_size: examples per batch.
            drop_remainder: drop a last, smaller batch. Defaults to False.
        """
        return self._with(batch=(check_int("batch_size", batch_size), bool(drop_remainder)))

    def cache(self, path: str | os.PathLike[str] = "") -> Pipeline:
        """Caches decoded examples in memory, or in files at `path`.

        The cache goes where this call is among `map()`s, but never after a random map (that
        would freeze the augmentation): then it moves before it, with a `TfpipeWarning`.

        Examples:
            >>> augment = lambda ex: {**ex, "image": tf.image.random_flip_left_right(ex["image"])}
            >>> ds = tfpipe.Pipeline("out/train").cache().map(augment, random=True).build()
            >>> sum(1 for _ in ds)
            24

        Args:
            path: a file prefix for an on-disk cache (a local path or a URL TensorFlow
                opens). Defaults to "" (memory).
        """
        path = os.fspath(path)
        fs.check_paths(path, "path")  # object stores have no folders to check
        if (
            path
            and not fs.is_url(path)
            and not os.path.isdir(os.path.dirname(os.path.abspath(path)))
        ):
            raise ValueError(
                f"cache path {path!r}: the folder {os.path.dirname(path)!r} is missing"
            )
        return self._with(cache=(path, len(self._transforms)))

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Pipeline:
        """Sets the prefetch buffer of the last stage (always present). Defaults to AUTOTUNE.

        Examples:
            >>> print(tfpipe.Pipeline("out/train").batch(8).prefetch(2).explain())
             1. list 2 TFRecord file(s) of out/train
             ...
            10. prefetch 2
             ...
        """
        if buffer_size != AUTOTUNE:
            check_int("buffer_size", buffer_size)
        return self._with(prefetch=buffer_size)

    def repeat(self, count: int | None = None) -> Pipeline:
        """Repeats the data `count` times (forever with None), reshuffling every pass.

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").shuffle(seed=0).repeat().batch(8).build()
            >>> len(list(ds.take(5)))  # more than the 3 batches of one pass
            5
        """
        if count is not None:
            check_int("count", count)
        return self._with(repeat=count)

    def take(self, count: int) -> Pipeline:
        """Keeps `count` examples (not batches) per epoch, taken before any cache.

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").take(12).batch(10).build()
            >>> sorted(len(batch["label"]) for batch in ds)  # the order may vary: no seed
            [2, 10]
        """
        check_int("count", count)
        return self._with(take=count)

    def shard(self, num: int, index: int) -> Pipeline:
        """Keeps shard `index` of `num` for one of `num` workers: by file when there are at
        least `num` TFRecord files, else by record. Together the shards see each example once.

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").shard(2, 0).batch(64).build()
            >>> len(next(iter(ds))["label"])  # one of the 2 files
            12
        """
        check_int("num", num)
        if not is_int(index) or not 0 <= index < num:
            raise ValueError(f"index must be an int in [0, {num}). Received: index={index!r}")
        return self._with(shard=(num, index))

    def start_at(self, epoch: int = 0, batch: int = 0) -> Pipeline:
        """Starts at batch `batch` of epoch `epoch`, with the batches an uninterrupted run has.

        Each epoch's order is then a pure function of `(seed, epoch)`: every epoch is built
        afresh from a seed derived from both, so the batches do not depend on how many
        iterators came before (`tfpipe.fit(backup_dir=...)` resumes with it). The batches
        before the start are skipped as raw records (serialized bytes or indices), before
        parsing and decoding. Without `repeat()` the dataset is the rest of epoch `epoch`;
        with `repeat()` it goes on with the next epochs, each a new order (the epoch count
        of `repeat(count)` includes those before `epoch`). Needs `shuffle(seed=...)` (or no
        shuffle) and a deterministic order; a random `map()` (augmentation) draws new
        randomness, only the examples and their order are the same.

        Examples:
            >>> p = tfpipe.Pipeline("out/train").shuffle(seed=0).batch(8)
            >>> rest = p.start_at(epoch=2, batch=1).build()  # batches 1.. of epoch 2
            >>> len(list(rest)), p.batches_per_epoch()
            (2, 3)

        Args:
            epoch: the epoch to start in, from 0. Defaults to 0.
            batch: the first batch of that epoch, from 0. Defaults to 0.
        """
        epoch, batch = check_position(epoch, batch, self.batches_per_epoch())
        for wrong, why in (
            (self._shuffle and self._seed is None, "shuffle() has no seed: pass shuffle(seed=0)"),
            (self._options.deterministic is False, "options(deterministic=False) is set"),
            (self._cache is not None, "cache() is set: decoded examples cannot be skipped"),
            (any(t.kind == "filter" for t in self._transforms), "a filter() changes batches"),
            (isinstance(self._input, PyDatasetInput), "the source is a PyDataset"),
            (self._repeat not in (0, None) and epoch >= self._repeat, "repeat() ends before"),
        ):
            if wrong:
                raise ValueError(
                    f"start_at(epoch={epoch}, batch={batch}) needs the same batches in every "
                    f"run, but {why}"
                )
        return self._with(start=(epoch, batch))

    @property
    def seed(self) -> int | None:
        """The seed given to `shuffle()`; None without one (or without a shuffle).

        Examples:
            >>> tfpipe.Pipeline("out/train").shuffle(seed=3).seed
            3
        """
        return self._seed

    def identity(self) -> Identity:
        """What a position of this pipeline (see `start_at`) is valid for: its data (the
        files, their sizes and the example count; or the examples of a source), its batch
        size and its seed.

        Examples:
            >>> tfpipe.Pipeline("out/train").shuffle(seed=0).batch(64).identity().batch_size
            64
        """
        inp = self._input
        parts = [*inp.identity(), repr((self._take, self._shard, self._batch))]
        size = (self._batch or (_DEFAULT_BATCH, False))[0]
        return Identity(digest(parts), inp.describe(), size, self._seed or 0)

    def distribute(
        self,
        service: str,
        *,
        mode: str = "dynamic",
        job_name: str | None = None,
        timeout: float | None = 120,
    ) -> Pipeline:
        """Runs the expensive part (read, parse, decode, maps, batch) on tf.data service workers.

        Everything up to the batches runs on the workers of the dispatcher at `service` (start
        them with `tfpipe service dispatcher` and `tfpipe service worker`); this process only
        receives batches over gRPC, re-slices them to `batch_size` (each worker ends its share
        of an epoch with a short batch), repeats and prefetches. `explain()` shows the split.

        With `mode="dynamic"` the dispatcher hands each TFRecord file (each example of an
        in-memory source) to one worker per epoch: every example once per epoch while no
        worker fails. A worker that fails mid-epoch loses the rest of the files it was reading
        for that epoch (at most once, never twice): the epoch is shorter, which `tfpipe.fit`
        counts and warns about. So `build()` does not declare a length; `tfpipe.fit` sizes
        epochs at one pass and counts what every pass delivered. Files are the unit of work:
        write at least as many shards as workers. Batches cross the network uncompressed,
        and uint8 images are 4x fewer bytes than float32 ones: leave `rescale`
        out and rescale in the model (`keras.layers.Rescaling`) when the hop is the limit.

        Workers must be able to open the files (the same paths, or a shared file system) and
        run every map: a `tf.py_function` cannot travel to them. `cache()`, `take()`,
        `shard()`, `truncate=True` and a `keras.utils.PyDataset` source are refused (on the
        workers they would apply to each worker's share, or cannot be sent to them); share a
        job between trainers with `job_name`.

        Examples:
            >>> p = tfpipe.Pipeline("out/train").shuffle().batch(64).distribute("10.0.0.5:5050")
            >>> print(p.explain())
             1. list 2 TFRecord file(s) of out/train
             ...
            12. distribute: the stages above run on the tf.data service workers of
                grpc://10.0.0.5:5050 ...
            13. rebatch to 64 (each worker's share of an epoch ends in a short batch)
            14. prefetch AUTOTUNE
            15. options: deterministic=False
            >>> # build() registers the pipeline with the dispatcher, which must be running:
            >>> ds = p.build()  # doctest: +SKIP

        Args:
            service: the dispatcher's address, "grpc://HOST:PORT" (or "HOST:PORT").
            mode: "dynamic" (each example once per epoch among the workers) or "off" (every
                worker reads all the data: with k workers, k copies per epoch). Defaults to
                "dynamic".
            job_name: trainers whose Pipelines use the same job name split one job's data
                among them. Defaults to None (a job of its own for every iteration).
            timeout: seconds the dispatcher or a worker may go unanswered during any read
                of the built dataset (training, fit's report, your own loop) before the read
                fails with a `SourceError` naming them (a worker that died and was not
                restarted would make every later epoch wait for it). Slow workers that answer
                are waited for. None waits forever. Defaults to 120.
        """
        return self._with(service=DataService(service, mode, job_name, timeout))

    @property
    def service(self) -> DataService | None:
        """The tf.data service `distribute()` set (`address`, `mode`, `job_name`); else None.

        Examples:
            >>> tfpipe.Pipeline("out/train").distribute("10.0.0.5:5050").service.address
            'grpc://10.0.0.5:5050'
        """
        return self._service

    def options(
        self,
        *,
        deterministic: bool | None = None,
        ram_budget_mb: int | None = None,
        threads: int | None = None,
    ) -> Pipeline:
        """tf.data options: output order, autotune RAM budget, private thread pool size.

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").options(deterministic=False, threads=4).build()
            >>> ds.options().deterministic, ds.options().threading.private_threadpool_size
            (False, 4)

        Args:
            deterministic: keep a fixed output order. Defaults to None (True without a
                shuffle, with a shuffle seed or with `start_at`: without a shuffle the order is
                the source's; False for an unseeded shuffle, for throughput).
            ram_budget_mb: RAM autotune may use for buffers, in MB. Defaults to None (TF's).
            threads: size of a private thread pool. Defaults to None (TF's shared pool).
        """
        return self._with(options=PipelineOptions(deterministic, ram_budget_mb, threads))

    def as_supervised(self, x: Names | None = None, y: Names | None = None) -> Pipeline:
        """Yields `(x, y)` pairs for `model.fit`, following Keras's conventions: a list of names
        gives a tuple of tensors (multi-input or multi-output models, in the model's order), a
        dict of model input/output name -> feature name gives a dict (matched by name).

        Examples:
            >>> src = tfpipe.from_arrays({"image": np.zeros((4, 8, 8, 3), np.uint8),
            ...                           "weather": np.array([0, 1, 2, 3]),
            ...                           "ground": np.array([1, 1, 0, 0])})
            >>> ds = tfpipe.Pipeline(src).batch(4).as_supervised("image", ["weather", "ground"])
            >>> images, (weather, ground) = next(iter(ds.build()))
            >>> images.shape, weather.shape, ground.shape
            (TensorShape([4, 8, 8, 3]), TensorShape([4]), TensorShape([4]))

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

        Examples:
            >>> tfpipe.Pipeline("out/train").as_supervised("image", "label").supervised
            ('image', 'label')
        """
        return self._supervised

    @property
    def schema(self) -> Schema | None:
        """The schema of what the pipeline reads; None for a `keras.utils.PyDataset` source.

        Examples:
            >>> tfpipe.Pipeline("out/train").schema["image"].encoding
            'jpeg'
        """
        return getattr(self._input, "schema", None)

    @property
    def batch_size(self) -> int | None:
        """The size of the batches `batch()` asked for; None without a `batch()`.

        The last batch of an epoch may be smaller (unless `drop_remainder=True`); every other
        batch has this size, whatever order a non-deterministic pipeline yields them in.

        Examples:
            >>> tfpipe.Pipeline("out/train").batch(64).batch_size
            64
        """
        return None if self._batch is None else self._batch[0]

    def examples_per_epoch(self) -> int | None:
        """Examples in one pass over the data (ignoring `repeat()`), known from the metadata.

        None when it cannot be known without reading the data: a filter(), a shard(), a
        source of unknown size, or `distribute(mode="off")`. With `distribute()` in the
        default dynamic mode, it is the count while no service worker fails. Examples dropped
        with a partial last batch do not count.

        Examples:
            >>> tfpipe.Pipeline("out/train").batch(5, drop_remainder=True).examples_per_epoch()
            20
        """
        count = self._input.num_examples
        filtered = any(t.kind == "filter" for t in self._transforms)
        copies = self._service is not None and self._service.mode == "off"
        if count is None or filtered or self._shard is not None or copies:
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

        Examples:
            >>> fault = tfpipe.Pipeline("out/damaged").locate_fault()
            >>> print(fault)
            record 5 of out/damaged-00001-of-00002.tfrecord: damaged or truncated frame: ...
        """
        return self._input.locate_fault(self._decoding)

    def truncated(self) -> dict[str, int]:
        """How many values `truncate=True` cut to their pad length so far, per feature.

        Counted as examples are read (one read twice counts twice), by this pipeline and every
        variant built from the same `Pipeline(...)`; empty without `truncate=True`.

        Examples:
            >>> src = tfpipe.from_arrays({"tokens": [[1, 2, 3], [4, 5, 6, 7, 8], [9]]})
            >>> p = tfpipe.Pipeline(src, pad={"tokens": 4}, truncate=True).batch(3)
            >>> batches = list(p.build())
            >>> p.truncated()
            {'tokens': 1}
        """
        return self._padding.truncated()

    def batches_per_epoch(self) -> int | None:
        """Batches in one pass over the data (ignoring `repeat()`), known from the metadata.

        None when it cannot be known without reading the data: no batch(), a filter(), a
        shard(), or a source of unknown size. `tfpipe.fit` uses it to size repeated epochs.

        Examples:
            >>> tfpipe.Pipeline("out/train").batch(10).batches_per_epoch()  # 24 examples
            3
        """
        count = self.examples_per_epoch()
        if count is None or self._batch is None:
            return None
        return math.ceil(count / self._batch[0])

    def _without_maps(self) -> tuple[tf.data.Dataset, tuple[str, ...], bool] | None:
        """The dataset of this pipeline without its map()s and `as_supervised`, the maps'
        names, and whether one is random (for `tfpipe.fit`'s report, which times the input
        with and without them); None without maps, and with a cache() or on the tf.data
        service, which decide what each batch recomputes."""
        maps = [t for t in self._transforms if t.kind == "map"]
        if not maps or self._cache is not None or self._service is not None:
            return None
        dataset = self._with(
            transforms=tuple(t for t in self._transforms if t.kind != "map"), supervised=None
        ).build()
        examples = dataset.unbatch() if self._batch is not None else dataset
        random = False
        for transform in maps:  # each traced on what it receives (filters keep the spec)
            random = transform.is_random(examples.element_spec)
            if random:
                break
            examples = transform.apply(examples)
        return dataset, tuple(t.name for t in maps), random

    def explain(self) -> str:
        """The plan `build()` runs, one stage per line, in order.

        Examples:
            >>> print(tfpipe.Pipeline("out/train").batch(64).shuffle(seed=0).explain())
             1. list 2 TFRecord file(s) of out/train
             2. shuffle file list (seed=0, reshuffled each epoch)
             3. interleave reads of 2 file(s) at a time (parallel, AUTOTUNE)
             4. shuffle records (buffer 24, seed=0, reshuffled each epoch)
             5. batch 64 records
             6. parse_example (vectorised), images and masks kept as stored bytes
             7. read the EXIF orientation of every JPEG (vectorised)
             8. unbatch
             9. decode images per example (parallel, AUTOTUNE)
            10. batch 64
            11. declare 1 batches per epoch (from the example count)
            12. prefetch AUTOTUNE
            13. options: deterministic=True
        """
        _, labels = self._assemble(explain=True)
        return "\n".join(f"{i:2d}. {label}" for i, label in enumerate(labels, 1))

    def build(self) -> tf.data.Dataset:
        """The `tf.data.Dataset`, ready for `model.fit`.

        A loop over it (`for batch in ds:`) that meets damaged data (a damaged shard, a record
        that is not an Example, a corrupt image file) raises a `DecodeError` naming the file
        and record, found by `locate_fault`, with TensorFlow's error as its cause. That holds
        for this dataset itself: after a further `.map`/`.batch`, or in `model.fit`, wrap the
        loop in `tfpipe.named_errors(pipeline)` (`tfpipe.fit` does).

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").batch(64).build()
            >>> {name: spec.dtype.name for name, spec in ds.element_spec.items()}
            {'image': 'uint8', 'label': 'int64'}
        """
        dataset, _ = self._assemble()
        return NamedDataset(dataset, self._named_error)

    def _named_error(self, error: BaseException) -> Exception | None:
        """The DecodeError naming the record behind a raw error of the built dataset, or None
        when the error is not the data's or no fault is found."""
        if not from_input(error):
            return None
        fault = self.locate_fault()
        return None if fault is None else named_error(fault, error)

    def build_distributed(self, strategy: tf.distribute.Strategy | None = None) -> DistributedInput:
        """The dataset for training under a `tf.distribute` strategy, each worker on its part.

        `batch(n)` is the global batch of one step, split evenly over every worker and replica.
        Each worker reads its own files when there are at least as many TFRecord files as
        workers, else every n-th record; an epoch is as many whole global batches as every
        worker can fill, and the examples left over (fewer than a global batch when the split
        is even) are left out of that epoch, with a `TfpipeWarning` counting them.
        `tfpipe.fit` calls this itself for a model built under a multi-replica strategy.

        After `start_at(epoch, batch)`, the position is global: `batch` counts steps of the
        global batch, and each worker starts at its own part of that step, skipping the
        records before it undecoded. Every epoch's order is then a pure function of
        `(seed, epoch)`, so the batches are those of a run built from `start_at(0)` (the
        number of workers and the global batch must stay the same).

        Examples:
            >>> strategy = tf.distribute.MirroredStrategy(["/cpu:0"])  # or MultiWorkerMirrored...
            >>> pipeline = (tfpipe.Pipeline("out/train").shuffle(seed=0).batch(8)
            ...             .as_supervised("image", "label"))
            >>> data = pipeline.build_distributed(strategy)
            >>> data.steps_per_epoch, data.per_replica_batch_size
            (3, 8)
            >>> rest = pipeline.start_at(epoch=1, batch=2).build_distributed(strategy)

        Args:
            strategy: the strategy the model was built under. Defaults to None (the current
                one, `tf.distribute.get_strategy()`).

        Raises:
            ValueError: no `batch()`, a batch size the replicas do not divide, a `filter()`,
                `take()`, `shard()` or `repeat(count)` that would give workers unequal epochs,
                or a `start_at` batch past the steps of an epoch.
            SourceError: the examples per worker are unknown (TFRecords without metadata, a
                PyDataset), or a worker would not fill one step.
        """
        strategy = strategy or tf.distribute.get_strategy()
        if self._batch is None:
            raise ValueError(
                "build_distributed: call batch(global_batch_size) first; the batch is split "
                "over every worker and replica"
            )
        unequal = [
            name
            for name, given in (
                ("filter()", any(t.kind == "filter" for t in self._transforms)),
                ("take()", self._take is not None),
                ("shard()", self._shard is not None),
                (f"repeat({self._repeat})", self._repeat not in (0, None)),
            )
            if given
        ]
        if unequal:
            raise ValueError(
                f"build_distributed: {unequal[0]} cannot apply; each worker must know how many "
                "examples it reads to run as many steps as the others (the distributed dataset "
                "repeats by itself, and the strategy shards it). Filter when writing the records"
            )
        workers = Layout.of(strategy).num_workers
        examples, by = self._worker_examples(workers)
        shard = None if workers == 1 else workers

        def worker_dataset(
            worker: int, per_replica: int, batches: int, skip: int
        ) -> tf.data.Dataset:
            part = self._with(
                shard=None if shard is None else (shard, worker),
                batch=(per_replica, True),
                repeat=0,
            )
            if self._start is None:
                return part.build().take(batches).repeat()
            start = (self._start[0], skip)  # each epoch built from (seed, epoch), then cut
            return part._with(repeat=None, start=start, epoch_batches=batches).build()

        start = 0 if self._start is None else self._start[1]
        name = f"Pipeline({self._name()})"
        return distribute(strategy, worker_dataset, examples, self._batch[0], by, name, start)

    def _name(self) -> str:
        return repr(getattr(self._input, "name", type(self._input).__name__))

    def _worker_examples(self, workers: int) -> tuple[list[int], str]:
        """The examples each of `workers` reads, and whether files or records are split."""
        inp = self._input
        files = getattr(inp, "files", [])
        if workers > 1 and len(files) >= workers:
            info = inp.info
            declared = {} if info is None else {s.file: s.num_examples for s in info.shards}
            counts = [declared.get(os.path.basename(f)) for f in files]
            if None not in counts:
                return file_split(counts, workers), "file"  # type: ignore[arg-type]
        elif inp.num_examples is not None:
            return record_split(inp.num_examples, workers), "record"
        raise SourceError(
            f"Pipeline({self._name()}): the number of examples each worker reads is unknown "
            "(TFRecords without tfpipe metadata, or a PyDataset), so workers could run unequal "
            "epochs and wait forever for each other. Write the records with "
            "tfpipe.write_tfrecords (its metadata counts each shard), or use a SequenceLoader"
        )

    def _assemble(self, explain: bool = False) -> tuple[tf.data.Dataset, list[str]]:
        self._check_service()
        assembly = _Assembly()
        deterministic = self._options.deterministic
        det = self._fixed_order() if deterministic is None else deterministic
        if self._start is not None and self._service is not None:
            raise ValueError(
                "start_at() and distribute() cannot be combined: with dynamic sharding the "
                "service decides which worker reads what, so the batches of a run cannot be "
                "replayed from a position"
            )
        if self._start is None:
            self._one_pass(assembly, self._seed, 0, det)
            if self._service is not None:
                self._serve(assembly, self._service, det, explain)
            batches = self.batches_per_epoch()
            if batches is not None and self._repeat == 0 and self._service is None:
                # Keras then shows the epoch's length and never stops on "input ran out of
                # data"; a dataset that does not hold what its metadata says fails instead.
                assembly.run(
                    f"declare {batches} batches per epoch (from the example count)",
                    lambda ds: ds.apply(tf.data.experimental.assert_cardinality(batches)),
                )
        else:
            self._epochs(assembly, det)
        label = "AUTOTUNE" if self._prefetch == AUTOTUNE else str(self._prefetch)
        assembly.run(f"prefetch {label}", lambda ds: ds.prefetch(self._prefetch))
        assembly.run(f"options: deterministic={det}", lambda ds: self._apply_options(ds, det))
        return assembly.dataset, assembly.labels

    def _fixed_order(self) -> bool:
        """Whether the order is the user's to rely on: the source's order (no shuffle), a
        seeded one or a resumed one. Only an unseeded shuffle lets parallel stages yield
        elements as they finish."""
        return not self._shuffle or self._seed is not None or self._start is not None

    def _one_pass(self, assembly: _Assembly, seed: Any, skip: Any, det: bool) -> None:
        """Every stage up to `as_supervised`: one pass, or `repeat()`ed ones, less the first
        `skip` records (a resumed epoch; counted on the raw records, before any decoding)."""
        inp = self._input
        cached = self._cache is not None
        stages, by_record = inp.read(self._shard, seed, self._shuffle and not cached, det)
        assembly.run_all(stages)
        if self._shard is not None and by_record:
            num, index = self._shard
            assembly.run(f"shard records {index} of {num}", lambda ds: ds.shard(num, index))
        if self._take is not None and not inp.decoded:
            assembly.run(f"take {self._take} examples", lambda ds: ds.take(self._take))
        if not cached:
            self._shuffle_and_repeat(assembly, self._record_buffer(), "records", seed)
        if self._start is not None:
            assembly.run("skip the records of the batches before the start", lambda d: d.skip(skip))
        if isinstance(inp, PyDatasetInput):
            assembly.run_all(inp.loader(det))
            if self._take is not None:
                assembly.run(f"take {self._take} examples", lambda ds: ds.take(self._take))
        else:
            stays = not self._transforms and not (cached and self._shuffle)
            size, drop = self._batch or (_DEFAULT_BATCH, False)
            # On the service, each worker would drop the remainder of its own share.
            drop = drop and stays and self._service is None
            assembly.run(
                f"batch {size} records" + (" (drop remainder)" if drop else ""),
                lambda ds: ds.batch(size, drop_remainder=drop),
            )
            # Encoded images are decoded one example at a time after an unbatch, in a parallel
            # map (or the first map's calls): every core stays busy, where a `tf.map_fn` per
            # batch left the parallelism to the autotuner's guess per batch.
            defer = not cached and inp.defers_images()
            decoder = inp.decoder(self._decoding, defer_images=defer)
            assembly.run_all([decoder, *self._padding.stages])
            assembly.batched = True
            if defer:
                orient, label, decode = inp.image_decoders(self._decoding)
                assembly.run(*orient)
                assembly.unbatch()
                if self._transforms and self._transforms[0].takes_prepare():
                    assembly.prepare = lambda pair: decode(*pair)
                    name = self._transforms[0].name
                    assembly.run(f"{label}, in the parallel calls of {name}", lambda ds: ds)
                else:
                    assembly.run(
                        f"{label} (parallel, AUTOTUNE)",
                        lambda ds: ds.map(decode, num_parallel_calls=AUTOTUNE),
                    )
        self._transforms_and_cache(assembly)
        if self._batch is not None and not assembly.batched:
            size, drop = self._batch
            drop = drop and self._service is None
            assembly.run(
                f"batch {size}" + (" (drop remainder)" if drop else ""),
                lambda ds: ds.batch(size, drop_remainder=drop),
            )
        elif self._batch is None and assembly.batched and self._service is None:
            assembly.unbatch()
        if self._supervised is not None:
            self._supervise(assembly)

    def _epochs(self, assembly: _Assembly, det: bool) -> None:
        """Epoch after epoch from `start_at`, each one pass in an order that is a pure function
        of (seed, epoch): each epoch is built afresh with its own seed, never reshuffled."""
        epoch, batch = self._start  # type: ignore[misc]
        last = _FOREVER if self._repeat is None else (self._repeat or epoch + 1)
        size = (self._batch or (_DEFAULT_BATCH, False))[0]
        inner = _Assembly()
        one_epoch = self._with(repeat=0)

        @tf.autograph.experimental.do_not_convert  # plain Python building the epoch's stages
        def epoch_dataset(number: tf.Tensor) -> tf.data.Dataset:
            # Only (seed, epoch) decide the order, not a global tf.random.set_seed: this
            # function's own graph is traced without the global seed.
            tf.compat.v1.get_default_graph().seed = None
            seed = tf.random.stateless_uniform(
                (), tf.stack([tf.constant(self._seed, tf.int64), number]), 0, 2**62, tf.int64
            )
            skip = tf.where(number == epoch, tf.constant(batch * size, tf.int64), 0)
            inner.dataset, inner.labels, inner.batched = None, [], False
            one_epoch._one_pass(inner, seed, skip, det)
            if self._epoch_batches is not None:  # build_distributed: less the skipped ones
                inner.run(
                    f"take the {self._epoch_batches} batches of the epoch every worker runs",
                    lambda ds: ds.take(self._epoch_batches - skip // size),
                )
            return inner.dataset

        until = "forever" if last == _FOREVER else f"to epoch {last - 1}"
        assembly.run(
            f"for each epoch from {epoch} {until} (its seed from seed={self._seed} and the "
            f"epoch), starting at batch {batch} of epoch {epoch}:",
            lambda _: tf.data.Dataset.range(epoch, last).flat_map(epoch_dataset),
        )
        assembly.labels += [f"   {_SEED_TENSOR.sub('seed=of the epoch', x)}" for x in inner.labels]
        batches = self.batches_per_epoch()
        if batches is not None and last != _FOREVER:
            total = (last - epoch) * batches - batch
            assembly.run(
                f"declare {total} batches (from the example count)",
                lambda ds: ds.apply(tf.data.experimental.assert_cardinality(total)),
            )

    def _record_buffer(self) -> int:
        inp = self._input
        if isinstance(inp, PyDatasetInput):
            return inp.count
        if isinstance(inp, MemoryInput):
            return self._buffer or inp.num_examples
        by_bytes = max(_MIN_RECORD_BUFFER, int(_RECORD_BUFFER_BYTES // max(1, inp.record_bytes)))
        return self._buffer or min(inp.num_examples or _RECORD_BUFFER, _RECORD_BUFFER, by_bytes)

    def _shuffle_and_repeat(
        self, assembly: _Assembly, buffer: int, what: str, seed: Any = None
    ) -> None:
        if self._shuffle:
            seed = self._seed if seed is None else seed
            assembly.run(
                f"shuffle {what} (buffer {buffer}, seed={seed}, reshuffled each epoch)",
                lambda ds: ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True),
            )
        if self._service is None:
            self._repeat_stage(assembly)

    def _repeat_stage(self, assembly: _Assembly) -> None:
        if self._repeat != 0:
            times = "forever" if self._repeat is None else f"{self._repeat} times"
            assembly.run(f"repeat {times}", lambda ds: ds.repeat(self._repeat))

    def _check_service(self) -> None:
        """Refuses what cannot run on tf.data service workers, naming it."""
        if self._service is None:
            return
        refused = {
            "cache()": self._cache is not None,
            "take()": self._take is not None,
            "shard()": self._shard is not None,
            "a keras.utils.PyDataset source": isinstance(self._input, PyDatasetInput),
            "Pipeline(truncate=True) (its counter lives in this process)": bool(self._padding.cut),
        }
        for what, present in refused.items():
            if present:
                raise ValueError(
                    f"distribute(): {what} cannot run on tf.data service workers (each would "
                    "apply it to its own share of the data, or cannot be sent to them): drop "
                    "it, or drop distribute(). To split data between trainers, give their "
                    "Pipelines the same distribute(..., job_name=...)"
                )

    def _serve(self, assembly: _Assembly, service: DataService, det: bool, explain: bool) -> None:
        """Sends the stages so far to the service; rebatches and repeats in this process.
        To `explain`, the dispatcher is not contacted (the plan is the same)."""
        assembly.run(
            f"options on the workers: deterministic={det}",
            lambda ds: self._apply_options(ds, det),
        )
        inp = self._input
        splits = (
            f"the {len(inp.files)} TFRecord file(s)"
            if isinstance(inp, RecordInput)
            else f"the {inp.num_examples} example indices"
        )
        assembly.run(service.describe(splits), (lambda ds: ds) if explain else service.apply)
        if self._batch is not None:
            size, drop = self._batch
            assembly.run(
                f"rebatch to {size}"
                + (" (drop remainder)" if drop else "")
                + " (each worker's share of an epoch ends in a short batch)",
                lambda ds: ds.rebatch(size, drop_remainder=drop),
            )
        elif assembly.batched:
            assembly.unbatch()
        self._repeat_stage(assembly)

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
        assembly.run(f"as_supervised x={x!r}, y={y!r}", lambda ds: ds.map(plain(selector(x, y))))

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
