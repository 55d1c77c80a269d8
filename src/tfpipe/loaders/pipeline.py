"""`tfpipe.Pipeline`: say what the input should do; get the fast `tf.data` graph.

    Pipeline(source, ...) ──builder methods, each a new Pipeline──▶ its Recipe
        ──build() / explain() (tfpipe.loaders.assembly)──▶ the tf.data.Dataset / its stages
        ──build_distributed() (tfpipe.loaders.distributed_pipeline)──▶ one part per worker

The stages `build()` emits, in the order the tf.data performance guide recommends whatever
order the methods are called in, are described in `tfpipe.loaders.assembly`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from tfpipe import fs
from tfpipe.checks import check_image_size, check_int, check_positive, is_int
from tfpipe.distribute.sharding import DistributedFeed
from tfpipe.loaders.assembly import build
from tfpipe.loaders.distributed_pipeline import distributed
from tfpipe.loaders.echo import Echo
from tfpipe.loaders.inputs import AUTOTUNE, Decoding, make_input
from tfpipe.loaders.keras_layers import layer_map
from tfpipe.loaders.mixture import MixtureInput, check_weights, mixable
from tfpipe.loaders.padding import Padding
from tfpipe.loaders.pipeline_facts import PipelineFacts
from tfpipe.loaders.position import check_position
from tfpipe.loaders.recipe import PipelineOptions, Recipe
from tfpipe.loaders.seeding import stage_seed
from tfpipe.loaders.service import DataService
from tfpipe.loaders.supervised import Names, check_known, feature_names
from tfpipe.loaders.transforms import Renaming, any_random, new_transform


class Pipeline(PipelineFacts):
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
            shards or a list of these (local, or URLs TensorFlow opens: "gs://b/train"); a
            prepared TensorFlow Datasets folder; a folder of class folders of images (read as
            `tfpipe.from_directory` reads it); a `tfpipe.from_directory` / `from_dataframe` /
            `from_arrays` source (or a split of one); or a `keras.utils.PyDataset`.
        schema: the record schema. Defaults to None (the metadata's; for records without
            a metadata file, one inferred as `tfpipe.infer_schema` infers it).
        image_size: resize every image (block means, then bilinear, when shrinking) and every mask
            (nearest neighbour, so they stay aligned) to `(height, width)`. Defaults to None
            (the size the schema declares).
        reduced_decode: decode JPEGs at least twice `image_size` in both sides at the
            smallest DCT scale (1/2, 1/4, 1/8) that still covers it before resizing, as
            `SequenceLoader` and the writer do (the same pixels on every path); False decodes
            in full: slower, finer, and then the other paths need it too. Defaults to True.
        rescale: cast `Image` features to float32 and multiply by this finite number > 0
            (e.g. `1 / 255`); masks are never rescaled. Defaults to None (uint8 images).
        compression: None, "gzip" or "zlib" for TFRecords; one the metadata or a file's
            first bytes contradict is a ValueError naming the file. Defaults to "auto" (from
            the metadata, else the file suffix and first bytes).
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
        decoding = Decoding(image_size, bool(reduced_decode), rescale)
        inp = make_input(source, schema, compression, split)
        padding = Padding(pad, pad_value, truncate, inp.schema)
        self._recipe = Recipe(inp, decoding, padding)

    def __repr__(self) -> str:
        # Keras prints it in "Unrecognized data type: x=..." when given an unbuilt Pipeline.
        batch = "no batch()" if self.batch_size is None else f"batch_size={self.batch_size}"
        return f"Pipeline({self._recipe.name}, {batch}, unbuilt: model.fit takes pipeline.build())"

    @classmethod
    def sample_from(
        cls,
        sources: Sequence[Any],
        weights: Sequence[float] | None = None,
        *,
        seed: int = 0,
        stopping_strategy: str = "first_exhausted",
        examples_per_epoch: int | None = None,
    ) -> Pipeline:
        """A Pipeline of examples drawn from `sources` with `weights`, like
        `tf.data.Dataset.sample_from_datasets`, with epochs of a known size that resume exactly.

        Each source is read as its own Pipeline reads it (decoded, shuffled, its maps
        applied); the mixture picks the source of every example. An epoch holds an exact
        number of examples of each source (`mixture.counts`, within one of its weight's
        share), in an order the `seed` and the epoch decide. In `tfpipe.fit` and after
        `start_at` a source goes on where it stopped from one epoch to the next (used up, into
        its next epoch, in a new order); each iteration of a plain `build()` starts every
        source at a fresh pass. Batch, map, `as_supervised` and `start_at` the
        mixture as any Pipeline: a position is `(epoch, batch)`, and `tfpipe.fit(backup_dir=...)`
        resumes a killed run with exactly the batches it would have trained on.

        Examples:
            >>> mixed = (tfpipe.Pipeline.sample_from(["out/train", "out/train"], [3, 1], seed=0)
            ...          .batch(8).as_supervised("image", "label"))
            >>> mixed.mixture.counts, mixed.batches_per_epoch()
            ((24, 8), 4)
            >>> print(mixed.explain().split(" (seed")[0])
             1. mix 2 sources one example at a time

        Args:
            sources: Pipelines without batch(), as_supervised() or start_at(), or what
                `Pipeline` reads (a path, a source: read shuffled). Their features must agree
                in dtype and shape (an error names the feature and both sources); features
                not in every source are left out (`explain()` lists them); `rename()` a
                source's features to match. A source shuffled without a seed gets one from
                `seed`, so that the mixture is the same in every run.
            weights: each source's share of the examples (any scale). Defaults to None
                (equal shares).
            seed: decides the order of the sources' examples. Defaults to 0.
            stopping_strategy: the size of an epoch: "first_exhausted" (every example of
                the source its weight uses up first, once) or "all_exhausted" (every example
                of every source at least once; the others cycle). Defaults to
                "first_exhausted".
            examples_per_epoch: the examples of an epoch, instead of `stopping_strategy`.
                Defaults to None.
        """
        check_int("seed", seed, minimum=0)
        if examples_per_epoch is not None:
            check_int("examples_per_epoch", examples_per_epoch)
        if isinstance(sources, str | os.PathLike) or not sources:
            raise ValueError(
                "sources must be a non-empty list of Pipelines, paths or sources. "
                f"Received: sources={sources!r}"
            )
        recipes = [
            mixable(
                (source if isinstance(source, Pipeline) else cls(source).shuffle())._recipe,
                f"sources[{i}]",
                stage_seed(seed, i + 1) or 0,
            )
            for i, source in enumerate(sources)
        ]
        inp = MixtureInput(
            recipes,
            check_weights(weights, len(recipes)),
            seed=seed,
            examples_per_epoch=examples_per_epoch,
            stopping_strategy=stopping_strategy,
        )
        mixed = cls.__new__(cls)
        padding = Padding(None, 0, False, inp.schema)
        mixed._recipe = Recipe(inp, Decoding(None, True, None), padding, seed=seed)
        return mixed

    def rename(self, names: Mapping[str, str]) -> Pipeline:
        """Renames features (old name -> new name), e.g. to mix sources named otherwise.

        Examples:
            >>> p = tfpipe.Pipeline("out/train").rename({"label": "class"})
            >>> list(p.schema)
            ['image', 'class']
        """
        renaming = Renaming(names)
        recipe = self._recipe
        if recipe.schema is not None:
            renaming.schema(recipe.schema)
        return self._with(transforms=(*recipe.transforms, new_transform("map", renaming, False)))

    def _with(self, **changes: Any) -> Pipeline:
        new = copy.copy(self)
        new._recipe = self._recipe.replace(**changes)
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
            seed: makes the order reproducible (and the pipeline deterministic): the orders
                depend on this seed alone, not on TensorFlow's global seed
                (`keras.utils.set_random_seed`); after `start_at`, on (seed, epoch). Defaults
                to None (a fresh order each run, `deterministic=False` for speed: parallel
                stages yield elements as they finish).
            buffer_size: the shuffle buffer, in records. Defaults to every record for in-memory
                sources; for TFRecords min(examples, 4096, as many as fit in 32 MiB but at
                least 256) (the writer already shuffled globally); 1024 decoded examples after
                a cache.
        """
        if self.mixture is not None:
            raise ValueError(
                "shuffle(): a mixture's order comes from its seed and its sources' own "
                "shuffles: shuffle each source before Pipeline.sample_from"
            )
        if seed is not None:
            check_int("seed", seed, minimum=0)
        if buffer_size is not None:
            check_int("buffer_size", buffer_size)
        return self._with(shuffle=True, seed=seed, buffer=buffer_size)

    def map(
        self,
        fn: Callable[..., Any],
        *,
        random: bool | None = None,
        keys: str | Sequence[str] | None = None,
    ) -> Pipeline:
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

        A Keras layer (a `keras.Sequential` or `keras.layers.Pipeline` of them) transforms
        `keys`, the Image features by default, one example at a time, on every Keras backend
        (each layer runs TensorFlow ops in the tf.data graph). Its random draws are the
        Pipeline's: one seed per example, new every epoch, from `shuffle(seed=...)` (the same
        batches in every run; a fresh draw each run without a seed), not the layer's `seed=`.
        Keras layers return float32. See the guide "Augmentation", section "Keras layers".

        Examples:
            >>> augment = keras.Sequential([keras.layers.Rescaling(1 / 255),
            ...                             keras.layers.RandomFlip("horizontal"),
            ...                             keras.layers.RandomCrop(24, 24)])
            >>> ds = tfpipe.Pipeline("out/train").shuffle(seed=0).map(augment).batch(8).build()
            >>> ds.element_spec["image"]
            TensorSpec(shape=(None, 24, 24, 3), dtype=tf.float32, name=None)

        An object with a `map_dataset(dataset)` method maps the dataset itself: a
        `tfpipe.augment.Joint` zips a seed onto every example, so that its random flips and
        crops are reproducible in a parallel map; its `random` attribute says whether it is
        random.

        Args:
            fn: example dict -> example dict, a Keras layer, or an object with `map_dataset`.
            random: whether `fn` is random. Defaults to None (`fn.random` if it has one, else
                detected).
            keys: the features a Keras layer transforms, each with draws of its own. Defaults
                to None (every Image feature; with Mask features too, a random layer is
                refused: it would not move them with the images, `tfpipe.augment.Joint` does).
        """
        fn = layer_map(fn, keys, self._recipe.input.schema)
        return self._with(transforms=(*self._recipe.transforms, new_transform("map", fn, random)))

    def filter(self, predicate: Callable[..., Any]) -> Pipeline:
        """Keeps the examples for which `predicate(example)` is a True scalar bool tensor.

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").filter(lambda ex: ex["label"] < 2).build()
            >>> sum(1 for _ in ds)  # 2 classes of 8 images
            16
        """
        return self._with(
            transforms=(*self._recipe.transforms, new_transform("filter", predicate, False))
        )

    def echo(
        self, factor: int, *, unit: str = "example", buffer_size: int | None = None
    ) -> Pipeline:
        """Data echoing (Choi et al. 2019): each example, or batch, `factor` times per epoch,
        for when reading and decoding, not the model, limit training.

        Example echo runs after decoding (and a `cache()`), before the first random `map()`
        (each copy is augmented afresh); batch echo right after `batch()`. Each window of
        `buffer_size` elements is emitted `factor` times, each in a new random order (from
        the shuffle seed and epoch; `start_at` resumes it exactly), never one element twice in
        a row: copies are `buffer_size` apart on average. Counts include the copies.

        Examples:
            >>> p = tfpipe.Pipeline("out/train").shuffle(seed=0).echo(2).batch(8)
            >>> p.examples_per_epoch(), p.batches_per_epoch(), p.echo_factor  # 24 examples
            (48, 6, 2)

        Args:
            factor: uses of each element, an int >= 1 (1: no echo).
            unit: "example" or "batch". Defaults to "example".
            buffer_size: elements per window, held in memory. Defaults to None (examples:
                min(examples per epoch, 1024); batches: 16).
        """
        return self._with(echo=Echo(factor, unit, buffer_size))

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
        return self._with(cache=(path, len(self._recipe.transforms)))

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
        shuffle) and a deterministic order. A `tfpipe.augment.Joint` map draws as the
        uninterrupted run (from its seed, the epoch and the example's place in it); another
        random `map()` draws new randomness, only the examples and their order are the same.

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
        self._recipe.check_replayable(epoch, batch)
        return self._with(start=(epoch, batch))

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
        `truncate=True`, a `keras.utils.PyDataset` source and `shard(n)` over fewer than `n`
        files are refused (on the workers they would apply to each worker's share, or cannot
        be sent to them); share a job between trainers with `job_name`. Under a multi-worker
        strategy, `build_distributed` serves each training worker's files as its own job.

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
            ...                           "weather_label": np.array([0, 1, 2, 3]),
            ...                           "ground_label": np.array([1, 1, 0, 0])})
            >>> ds = (tfpipe.Pipeline(src).batch(4)
            ...       .as_supervised("image", ["weather_label", "ground_label"]))
            >>> images, (weather, ground) = next(iter(ds.build()))
            >>> images.shape, weather.shape, ground.shape
            (TensorShape([4, 8, 8, 3]), TensorShape([4]), TensorShape([4]))

        Args:
            x: the input feature name(s).
            y: the target feature name(s).
        """
        feature_names("x", x, "as_supervised")
        feature_names("y", y, "as_supervised")
        schema = self._recipe.schema
        renames_only = all(isinstance(t.fn, Renaming) for t in self._recipe.transforms)
        if schema is not None and renames_only:
            check_known(x, y, available=schema, where="as_supervised", what="the schema")
        return self._with(supervised=(x, y))

    def build(self) -> tf.data.Dataset:
        """The `tf.data.Dataset`, ready for `model.fit`.

        A loop over it (`for batch in ds:`) that meets damaged data (a damaged shard, a record
        that is not an Example, a corrupt image file) raises a `DecodeError` naming the file
        and record, found by `locate_fault`, with TensorFlow's error as its cause (a lost
        tf.data service worker: a `SourceError` naming it). That holds
        for this dataset itself: after a further `.map`/`.batch`, or in `model.fit`, wrap the
        loop in `tfpipe.named_errors(pipeline)` (`tfpipe.fit` does).

        Examples:
            >>> ds = tfpipe.Pipeline("out/train").batch(64).build()
            >>> {name: spec.dtype.name for name, spec in ds.element_spec.items()}
            {'image': 'uint8', 'label': 'int64'}
        """
        return build(self._recipe)

    def build_distributed(self, strategy: tf.distribute.Strategy | None = None) -> DistributedFeed:
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
        return distributed(self._recipe, strategy or tf.distribute.get_strategy())


def without_maps(pipeline: Pipeline) -> tuple[tf.data.Dataset, tuple[str, ...], bool] | None:
    """The dataset of `pipeline` without its map()s and `as_supervised`, the maps' names, and
    whether one is random (for `tfpipe.fit`'s report, which times the input with and without
    them); None without maps, and with a cache() or on the tf.data service, which decide what
    each batch recomputes.

    Examples:
        >>> flip = lambda ex: {**ex, "image": tf.image.flip_left_right(ex["image"])}
        >>> dataset, maps, random = without_maps(tfpipe.Pipeline("out/train").map(flip))
        >>> maps, random
        (('map(<lambda>)',), False)
    """
    recipe = pipeline._recipe
    maps = [t for t in recipe.transforms if t.maps]
    if not maps or recipe.cache is not None or recipe.service is not None:
        return None
    dataset = pipeline._with(
        transforms=tuple(t for t in recipe.transforms if not t.maps), supervised=None
    ).build()
    examples = dataset.unbatch() if recipe.batch is not None else dataset
    return dataset, tuple(t.name for t in maps), any_random(maps, examples)
