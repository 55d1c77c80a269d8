"""The one dispatcher that turns every input tfpipe trains on into a `Feed`, what fit feeds Keras.

    tf.data.Dataset ───────────────prefetched────────▶ DatasetFeed
    tfpipe.Pipeline ───────────────build()───────────▶ PipelineFeed
    "out/train" (TFRecords), a source ─default Pipeline▶ PathFeed
    keras.utils.PyDataset (a SequenceLoader too) ────▶ PyDatasetFeed

Each kind of Feed answers for itself what `fit`, `benchmark` and the report ask of an
input (its batches, whether it can be repeated into one iterator, its split under a strategy,
the loader backups resume, ...): `adapt` is the one place that looks at what an input is. It
sits above the loaders and below `named_errors`, `fit` and `benchmark`, which read every input
through it.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Self, cast

import keras
import tensorflow as tf

from tfpipe.checks import check_image_size, check_int
from tfpipe.distribute.sharding import DistributedFeed, Layout
from tfpipe.errors import SchemaError
from tfpipe.features import ClassLabel, Image
from tfpipe.features.tracing import plain
from tfpipe.format.resolution import ResolvedData, names_paths, resolve
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.sequence import SequenceLoader
from tfpipe.loaders.service import DataService
from tfpipe.loaders.supervised import Names, check_known, feature_names, selector
from tfpipe.records.resolved import random_access, schema_for
from tfpipe.schema import Schema
from tfpipe.sources import SourceBase
from tfpipe.training.resume import Resumable, ResumablePipeline, ResumableSequence

DEFAULT_BATCH_SIZE = 32


@dataclasses.dataclass(frozen=True, kw_only=True)
class Feed(abc.ABC):
    """One training input in the form Keras consumes, with what is known about it: the base of
    one class per kind of input, each answering for itself what `fit` asks of it.

    Attributes:
        data: the `tf.data.Dataset` (ending in a prefetch) or the `keras.utils.PyDataset`.
        steps: batches per epoch; None when unknown (a finite dataset Keras runs to its end)
            or infinite.
        infinite: the input repeats forever, so an epoch needs a `steps_per_epoch`.
        batch_size: the size of every batch but an epoch's last, as declared (a Pipeline's
            `batch()`, a SequenceLoader's `batch_size`, the static batch dimension of a
            dataset); None when only the batches can tell.
        examples: examples in one pass over the data, when known (metadata, source length).
        schema: the features the input holds, when known (a Pipeline's or a SequenceLoader's
            schema, a path's metadata, a source's); None for other kinds.
        pipeline: the `Pipeline` the input reads (for a Pipeline, a path or a source), which
            can locate the record behind a raw TensorFlow error; None for other kinds.
        service: the tf.data service the input's Pipeline runs on (`Pipeline.distribute`);
            None for other kinds.
        supervised: the `(x, y)` the input's Pipeline selects (`Pipeline.as_supervised`);
            None when it yields example dicts, or for other kinds.
        echo_factor: how many times the input's Pipeline repeats each example
            (`Pipeline.echo_factor`); 1 without echoing, and for other kinds.
        honours: the `tfpipe.fit` arguments this kind of input uses; others are warned about.
    """

    honours: ClassVar[frozenset[str]] = frozenset()

    data: Any
    steps: int | None
    infinite: bool
    batch_size: int | None
    examples: int | None
    schema: Schema | None
    pipeline: Pipeline | None = None
    service: DataService | None = None
    supervised: tuple[Names, Names] | None = None
    echo_factor: int = 1

    @property
    @abc.abstractmethod
    def label(self) -> str:
        """The kind of input in messages and the report: "tf.data", "PyDataset", "Pipeline",
        "TFRecords" (a path) or "source"."""

    @abc.abstractmethod
    def batches(self, *, repeat: bool = False) -> Iterator[Any]:
        """The batches of one epoch, or of epoch after epoch with `repeat=True`."""

    @property
    def image_encoding(self) -> str | None:
        """How the images are stored ("jpeg", "png", "raw" or "auto") when the schema has one
        Image feature; None for zero or several, or no schema."""
        images = [] if self.schema is None else list(self.schema.of(Image).values())
        return cast(Image, images[0]).encoding if len(images) == 1 else None

    @property
    def data_kind(self) -> str | None:
        """ "images" when the schema has an Image feature, "tensors" when it has none (a table,
        lists, text); None when no schema is known."""
        if self.schema is None:
            return None
        return "images" if self.schema.of(Image) else "tensors"

    @property
    def accepts_stages(self) -> bool:
        """Whether tfpipe can add tf.data stages after the batches: a meter of the time train
        steps wait for them, a prefetch into a device's memory."""
        return False

    @property
    def shuffled_by_keras(self) -> bool:
        """Whether Keras shuffles the batch order when `fit`'s `shuffle` allows it."""
        return False

    def one_iterator(
        self, steps: int | None, steps_per_execution: int
    ) -> tuple[Any, int | None, bool]:
        """What `model.fit` reads for the whole run, its `steps_per_epoch` (`steps`, the one
        given to fit, unless the input is repeated), and whether it never ends (Keras then
        reads it with one iterator for the whole run, across epochs): here the input as it is.
        """
        return self.data, steps, False

    def truncated(self) -> dict[str, int]:
        """How many values `truncate=True` cut to their pad length so far, per feature."""
        return {}

    def distributed(self, strategy: tf.distribute.Strategy) -> DistributedFeed | None:
        """The input split over the workers of a multi-replica `strategy`, each reading its own
        part and all running the same steps; None when Keras places the batches itself."""
        return None

    def resumable(
        self, *, strategy: tf.distribute.Strategy, steps_per_epoch: int | None
    ) -> Resumable:
        """The loader `backup_dir` resumes, as the training input (`data`) under `strategy`;
        `steps_per_epoch` is fit's (refused: positions count whole epochs). Refused here: this
        kind of input has no position to restore."""
        raise ValueError(
            "backup_dir resumes a tfpipe.Pipeline, a TFRecord path, a tfpipe source or a "
            f"tfpipe.SequenceLoader, whose position is (epoch, batch); data is a {self.label} "
            "input, whose position cannot be restored"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetFeed(Feed):
    """A `tf.data.Dataset`, ending in a prefetch: tfpipe can add stages to it, and repeat a
    finite one into one iterator for the run."""

    data: tf.data.Dataset

    @classmethod
    def of(cls, dataset: tf.data.Dataset) -> DatasetFeed:
        """A user's dataset, with a prefetch added unless it ends in one."""
        if type(dataset).__name__ != "_PrefetchDataset":
            dataset = dataset.prefetch(tf.data.AUTOTUNE)
        return cls.sized(dataset, examples=None, schema=None)

    @classmethod
    def sized(
        cls,
        dataset: tf.data.Dataset,
        *,
        steps_per_pass: int | None = None,
        batch_size: int | None = None,
        **fields: Any,
    ) -> Self:
        """A feed of `dataset` (ending in a prefetch) with the other `fields`: its steps are its
        length, else `steps_per_pass` (batches in one pass over the data, from metadata, which
        sizes the epochs of a repeated dataset); its batch size `batch_size`, else the batch
        dimension its elements declare."""
        cardinality = int(dataset.cardinality())
        return cls(
            data=dataset,
            steps=cardinality if cardinality >= 0 else steps_per_pass,
            infinite=cardinality == tf.data.INFINITE_CARDINALITY,
            batch_size=batch_size or _static_batch_size(dataset.element_spec),
            **fields,
        )

    @property
    def label(self) -> str:
        """ "tf.data"."""
        return "tf.data"

    @property
    def accepts_stages(self) -> bool:
        """True: the batches come from a dataset in this host's memory."""
        return True

    def batches(self, *, repeat: bool = False) -> Iterator[Any]:
        """An iterator over the dataset, repeated unless it repeats already."""
        return iter(self.data.repeat() if repeat and not self.infinite else self.data)

    def one_iterator(
        self, steps: int | None, steps_per_execution: int
    ) -> tuple[Any, int | None, bool]:
        """A finite dataset repeated, with `steps_per_epoch` = one pass, when it can be.

        Keras makes a new iterator of a finite dataset at every epoch, and releasing an
        autotuned tf.data iterator stalled training for ~3 s once or twice per run (TF 2.21,
        also for a dataset held in memory; none with autotuning off). With one iterator for the
        whole run the pipeline never restarts, and every epoch is still exactly one pass over
        the data. Not when `steps` is given, or a pass is no whole number of executions.
        """
        data = self.data
        whole_executions = self.steps is not None and self.steps % steps_per_execution == 0
        if steps is None and not self.infinite and whole_executions:
            data, steps = data.repeat(), self.steps
        return data, steps, int(data.cardinality()) == tf.data.INFINITE_CARDINALITY


@dataclasses.dataclass(frozen=True, kw_only=True)
class PipelineFeed(DatasetFeed):
    """A `tfpipe.Pipeline`, built: a dataset whose Pipeline also locates damaged records,
    counts the values it truncated, splits over the workers of a strategy and resumes."""

    pipeline: Pipeline

    @classmethod
    def reading(cls, pipeline: Pipeline, *, schema: Schema | None, **fields: Any) -> Self:
        """A feed of `pipeline` (its dataset ends in its own prefetch) holding `schema`: what
        fit asks of the Pipeline is asked once, here."""
        return cls.sized(
            dataset=pipeline.build(),
            steps_per_pass=pipeline.batches_per_epoch(),
            batch_size=pipeline.batch_size,
            examples=pipeline.examples_per_epoch(),
            schema=schema,
            pipeline=pipeline,
            service=pipeline.service,
            supervised=pipeline.supervised,
            echo_factor=pipeline.echo_factor,
            **fields,
        )

    @property
    def label(self) -> str:
        """ "Pipeline"."""
        return "Pipeline"

    def truncated(self) -> dict[str, int]:
        """The Pipeline's count (`Pipeline.truncated`)."""
        return self.pipeline.truncated()

    def one_iterator(
        self, steps: int | None, steps_per_execution: int
    ) -> tuple[Any, int | None, bool]:
        """As for any dataset; but a mixture (`Pipeline.sample_from`) that can be replayed is
        repeated as `start_at` builds it, so that its sources go on where they stopped from
        one epoch to the next (the built dataset repeated would start each at a fresh pass),
        with the batches of a `backup_dir` run."""
        data, steps, forever = super().one_iterator(steps, steps_per_execution)
        pipeline = self.pipeline
        if forever and pipeline.mixture is not None and pipeline.position is None:
            # A mixture of served sources has no position to build from: left as it is.
            with contextlib.suppress(ValueError):
                data = pipeline.repeat().start_at(0).build()
        return data, steps, forever

    def distributed(self, strategy: tf.distribute.Strategy) -> DistributedFeed | None:
        """`Pipeline.build_distributed`. None on the tf.data service with one worker: Keras
        places its batches on the replicas, and `fit` counts what each pass delivered. Several
        workers each read their own part (Keras's auto-shard of every worker's whole job would
        use some examples twice in an epoch and others never)."""
        if self.service is not None and Layout.of(strategy).num_workers == 1:
            return None
        return self.pipeline.build_distributed(strategy)

    def resumable(
        self, *, strategy: tf.distribute.Strategy, steps_per_epoch: int | None
    ) -> Resumable:
        """The Pipeline, resumed (`Pipeline.start_at`)."""
        return ResumablePipeline(self.pipeline, "data", strategy, steps_per_epoch=steps_per_epoch)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PathFeed(PipelineFeed):
    """A path (TFRecords, a folder of images) or a tfpipe source, read by the default Pipeline
    `adapt` builds, which honours fit's `batch_size` and `shuffle`.

    Attributes:
        records: the path names TFRecords (False: a folder of images or a source).
    """

    honours: ClassVar[frozenset[str]] = frozenset({"batch_size", "shuffle"})

    records: bool

    @property
    def label(self) -> str:
        """ "TFRecords" for records, else "source"."""
        return "TFRecords" if self.records else "source"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PyDatasetFeed(Feed):
    """A `keras.utils.PyDataset`, read by index: Keras fetches and shuffles its batches. A
    `tfpipe.SequenceLoader` (`loader`) also declares its size and schema, counts the values it
    truncated, splits over the workers of a strategy and resumes.

    Attributes:
        loader: the PyDataset when it is a `tfpipe.SequenceLoader`; None for another.
    """

    honours: ClassVar[frozenset[str]] = frozenset({"shuffle"})

    data: keras.utils.PyDataset
    loader: SequenceLoader | None

    @classmethod
    def of(cls, data: keras.utils.PyDataset, loader: SequenceLoader | None) -> PyDatasetFeed:
        """A feed of `data`, which is `loader` when that is not None."""
        steps = data.num_batches
        schema = getattr(data, "schema", None)
        return cls(
            data=data,
            steps=steps,
            infinite=steps is None,
            batch_size=None if loader is None else loader.options.batch_size,
            examples=None if loader is None else loader.examples_per_epoch(),
            schema=schema if isinstance(schema, Schema) else None,
            loader=loader,
        )

    @property
    def label(self) -> str:
        """ "PyDataset"."""
        return "PyDataset"

    @property
    def image_encoding(self) -> str | None:
        """None: a PyDataset decodes its images itself."""
        return None

    @property
    def data_kind(self) -> str | None:
        """A SequenceLoader's, from its schema; None for another PyDataset."""
        return None if self.loader is None else super().data_kind

    @property
    def shuffled_by_keras(self) -> bool:
        """True: Keras shuffles a PyDataset's batch order."""
        return True

    def batches(self, *, repeat: bool = False) -> Iterator[Any]:
        """The batches by index, in order (endless when its number is unknown)."""
        total = self.data.num_batches
        if total is None:
            indices: Iterable[int] = itertools.count()
        else:
            indices = itertools.cycle(range(total)) if repeat else range(total)
        return (self.data[i] for i in indices)

    def truncated(self) -> dict[str, int]:
        """The SequenceLoader's count (`SequenceLoader.truncated`); empty for another."""
        return {} if self.loader is None else self.loader.truncated()

    def distributed(self, strategy: tf.distribute.Strategy) -> DistributedFeed | None:
        """`SequenceLoader.build_distributed`; None for another PyDataset (Keras shards it)."""
        return None if self.loader is None else self.loader.build_distributed(strategy)

    def resumable(
        self, *, strategy: tf.distribute.Strategy, steps_per_epoch: int | None
    ) -> Resumable:
        """The SequenceLoader, resumed (`SequenceLoader.start_at`); refused for another."""
        if self.loader is None:
            return super().resumable(strategy=strategy, steps_per_epoch=steps_per_epoch)
        return ResumableSequence(self.loader, "data", strategy, steps_per_epoch=steps_per_epoch)


def adapt(
    data: Any,
    *,
    batch_size: int | None = None,
    shuffle: bool = True,
    image_size: tuple[int, int] | None = None,
    argument: str = "data",
    x: Names | None = None,
    y: Names | None = None,
    pairs: bool = True,
    seed: int | None = None,
    schema: Schema | None = None,
) -> Feed:
    """Turns any input tfpipe accepts into its kind of `Feed`: the one place that dispatches on
    kind.

    Examples:
        >>> adapt(tf.data.Dataset.range(10).batch(4)).steps
        3

    Args:
        data: a `tfpipe.Pipeline`, a `tf.data.Dataset`, a `keras.utils.PyDataset`, a path
            `tfpipe.Pipeline` reads (a dataset prefix, TFRecord files, a glob, a folder of
            shards or of class folders of images, a list of these), or a tfpipe source.
        batch_size: the batch size of the default Pipeline built for a path or a source.
            Defaults to 32.
        shuffle: whether the default Pipeline built for a path or a source shuffles. Defaults
            to True.
        image_size: `(height, width)` images are resized to when a path's schema does not fix
            one. Defaults to None.
        argument: the argument name used in error messages. Defaults to "data".
        x: the feature name(s) the model takes, for inputs of example dicts (a path, a source,
            a Pipeline without `as_supervised`, a tf.data dataset of dicts). Defaults to None.
        y: the feature name(s) the model predicts, as `x`; given alone for a path or a
            source, `x` is its one Image, or without an Image (a table) a dict of every
            other feature by name. Defaults to None.
        pairs: whether a path or a source must give `(x, y)` pairs (for training); when False
            (timing the input alone) one without `x` and `y` whose schema is not one Image and
            one ClassLabel gives its example dicts. Defaults to True.
        seed: the shuffle seed of the default Pipeline built for a path or a source.
            Defaults to None (a new order every run).
        schema: the schema of TFRecords named by a path. Defaults to None (the metadata's;
            without metadata, inferred as `tfpipe.infer_schema` infers it).
    """
    batch_size = check_int("batch_size", batch_size, or_none=True)
    image_size = check_image_size("image_size", image_size)
    readable = _readable(data, argument, schema)
    by_schema = readable is not None
    if (x is None) != (y is None) and not (by_schema and x is None):
        missing = "y" if y is None else "x"
        raise ValueError(
            f"x and y go together: pass {missing}=... too (the feature name(s) the model "
            f"{'predicts' if missing == 'y' else 'takes'}). Received: x={x!r}, y={y!r}"
        )
    if schema is not None and (readable is None or isinstance(data, SourceBase)):
        raise ValueError(
            f"schema= describes TFRecords named by a path, but {argument} is a "
            f"{type(data).__name__}, which carries its own schema: drop schema=, or pass the path"
        )
    if readable is not None:
        x, y = readable.pairs(x, y, pairs=pairs)
        pipeline = readable.pipeline(
            batch_size=batch_size, shuffle=shuffle, image_size=image_size, seed=seed
        )
        return PathFeed.reading(
            pipeline if x is None else pipeline.as_supervised(x, y),
            schema=readable.schema,
            records=readable.records,
        )
    if isinstance(data, Pipeline):
        data = _supervised(data, argument, x, y)
        return PipelineFeed.reading(data, schema=data.schema)
    if isinstance(data, tf.data.Dataset):
        if x is not None and y is not None:
            data = _select(data, argument, x, y)
        return DatasetFeed.of(data)
    if isinstance(data, keras.utils.PyDataset):
        if x is not None:
            raise ValueError(
                f"x and y select features of example dicts, but {argument} is a "
                f"{type(data).__name__}, which yields its own (x, y) batches: drop x and y, or "
                f"pass a tfpipe.Pipeline, a source or a TFRecord path. Received: x={x!r}, y={y!r}"
            )
        return PyDatasetFeed.of(data, data if isinstance(data, SequenceLoader) else None)
    raise TypeError(
        f"{argument} must be a tfpipe.Pipeline, a tf.data.Dataset, a keras.utils.PyDataset, "
        "a path (TFRecords, a folder of images) or a tfpipe source. "
        f"Received: {argument} of type {type(data).__name__}"
    )


def check_pairs(data: Any, argument: str, x: Names | None) -> None:
    """Refuses a Pipeline of example dicts to train on without `x` (and `y`), before any data
    is read."""
    if x is None and isinstance(data, Pipeline) and data.supervised is None and data.schema:
        raise SchemaError(
            f"{argument}: the Pipeline yields dicts of features {list(data.schema)}, not "
            "(x, y) pairs: pass x=... and y=... (the feature name(s) the model takes and "
            "predicts), or call .as_supervised(x, y) on the Pipeline"
        )


def fault_search(source: Any) -> Callable[[], Pipeline]:
    """How `named_errors` searches `source` for the record behind a raw TensorFlow error: a
    Pipeline as it is, a path or a source read by a new Pipeline (made when an error is
    searched); refuses anything else."""
    if isinstance(source, Pipeline):
        return lambda: source
    if isinstance(source, str | os.PathLike | list | tuple | SourceBase):
        return functools.partial(Pipeline, source)
    raise TypeError(
        "named_errors takes tfpipe.Pipelines, TFRecord paths or tfpipe sources. "
        f"Received: {type(source).__name__}"
    )


def _static_batch_size(spec: Any) -> int | None:
    """The batch dimension every component of a dataset's elements declares, if one does."""
    shapes = [getattr(s, "shape", None) for s in tf.nest.flatten(spec)]
    sizes = {shape[0] for shape in shapes if shape is not None and shape.rank}
    return int(sizes.pop()) if len(sizes) == 1 and None not in sizes else None


@dataclasses.dataclass(frozen=True)
class Readable:
    """What a default Pipeline reads: resolved TFRecords or a source, with its schema.

    Attributes:
        data: the resolved TFRecords, or the source (also for a folder of images).
        schema: the features it holds.
        where: how messages name it (the argument and the path, or the source's class).
        records: `data` is TFRecords.
    """

    data: ResolvedData | SourceBase
    schema: Schema
    where: str
    records: bool

    def pairs(self, x: Names | None, y: Names | None, *, pairs: bool) -> tuple[Any, Any]:
        """The `x` and `y` the default Pipeline selects: as given (checked against the schema),
        or by default the one Image and the one ClassLabel, with `y` alone the one Image as
        `x`, or every other feature by name for a schema without Image; both None (example
        dicts) for another schema when not `pairs`."""
        schema, where = self.schema, self.where
        images, labels = list(schema.of(Image)), list(schema.of(ClassLabel))
        if x is None and len(images) == len(labels) == 1 and y is None:
            x, y = images[0], labels[0]
        if x is None and y is not None and not images:  # a table: x is every other feature
            x = {n: n for n in schema if n not in feature_names("y", y, where)}
        if x is None and y is not None:
            if len(images) != 1:
                raise SchemaError(
                    f"{where}: y={y!r} alone takes the one Image feature as x, but the schema "
                    f"has {len(images)} ({', '.join(images) or 'none'}): pass x=... too (the "
                    "feature name(s) the model takes)"
                )
            x = images[0]
        if x is None or y is None:
            if pairs:
                raise SchemaError(
                    f"{where}: without x and y, the default pipeline needs exactly one Image and "
                    f"one ClassLabel feature (its x and y), but the schema has {schema}. Pass "
                    "x=... and y=... (the feature name(s) the model takes and predicts), e.g. "
                    f"x={next(iter(schema))!r}, y={list(schema)[-1]!r}"
                    + (
                        ""
                        if images
                        else f", or y={list(schema)[-1]!r} alone (x: every other feature)"
                    )
                )
        else:
            check_known(x=x, y=y, available=schema, where=where, what="the schema")
        return x, y

    def pipeline(
        self,
        *,
        batch_size: int | None,
        shuffle: bool,
        image_size: tuple[int, int] | None,
        seed: int | None,
    ) -> Pipeline:
        """The default Pipeline over the data: shuffled with `seed` when `shuffle`, batched
        (`batch_size`, by default 32), images as float32 in [0, 1] resized to `image_size`
        when the schema does not fix their size."""
        fixed = all(None not in f.decoded_shape[:2] for f in self.schema.of(Image).values())
        pipeline = Pipeline(
            self.data,
            schema=self.schema if self.records else None,
            image_size=None if fixed else image_size,
            rescale=1 / 255,
        )
        if shuffle:
            pipeline = pipeline.shuffle(seed=seed)
        return pipeline.batch(DEFAULT_BATCH_SIZE if batch_size is None else batch_size)


def _readable(data: Any, argument: str, schema: Schema | None) -> Readable | None:
    """A path resolved once (records with their schema: given, the metadata's or inferred; a
    folder of images as a source), a source as it is; None for other inputs."""
    if isinstance(data, SourceBase):
        return Readable(data, data.schema, f"{argument} ({type(data).__name__})", records=False)
    if not names_paths(data):
        return None
    resolved = resolve(data, argument=argument)
    where = f"{argument}={resolved.origin!r}"
    if resolved.image_folder is not None:
        source = random_access(resolved, schema, argument=argument)
        return Readable(source, source.schema, where, records=False)
    return Readable(resolved, schema_for(resolved, schema), where, records=True)


def _supervised(pipeline: Pipeline, argument: str, x: Names | None, y: Names | None) -> Pipeline:
    """`pipeline` with `as_supervised(x, y)` when x and y are given; refused when it already
    yields pairs."""
    if x is None or y is None:
        return pipeline
    if pipeline.supervised is not None:
        raise ValueError(
            f"{argument} already yields (x, y) pairs (as_supervised{pipeline.supervised!r}), "
            f"and x={x!r}, y={y!r} were given too: say it in one place"
        )
    if pipeline.schema is not None:
        check_known(x=x, y=y, available=pipeline.schema, where=argument, what="the schema")
    return pipeline.as_supervised(x, y)


def _select(dataset: tf.data.Dataset, argument: str, x: Names, y: Names) -> tf.data.Dataset:
    """A tf.data dataset of example dicts mapped to `(x, y)` pairs."""
    spec = dataset.element_spec
    if not isinstance(spec, Mapping):
        raise ValueError(
            f"x and y select features of example dicts, but {argument} yields "
            f"{type(spec).__name__}s: drop x and y, or yield dicts. Received: x={x!r}, y={y!r}"
        )
    check_known(x=x, y=y, available=list(spec), where=argument, what="the dataset's examples")
    return dataset.map(plain(selector(x, y)), num_parallel_calls=tf.data.AUTOTUNE)
