"""The one dispatcher that turns every input tfpipe trains on into what Keras consumes.

    tfpipe.Pipeline ─────build()────────────┐
    tf.data.Dataset ─────────────────────────┼─▶ Input(data=prefetched Dataset, steps, ...)
    "out/train" (TFRecords) ─default Pipeline┘
    keras.utils.PyDataset ──────────────────────▶ Input(data=the PyDataset, steps=num_batches)

It sits above the loaders and below `fit` and `benchmark`, which read every input through it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import keras
import tensorflow as tf

from tfpipe.checks import check_image_size, check_int
from tfpipe.errors import SchemaError
from tfpipe.features import ClassLabel, Image
from tfpipe.features.tracing import plain
from tfpipe.format.lookup import ResolvedData, names_paths, resolve
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.sequence import SequenceLoader
from tfpipe.loaders.service import DataService
from tfpipe.loaders.supervised import Names, check_known, feature_names, selector
from tfpipe.records.locate import random_access, schema_for
from tfpipe.schema import Schema
from tfpipe.sources import SourceBase
from tfpipe.training.faults import named_errors

DEFAULT_BATCH_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Input:
    """One training input in the form Keras consumes, with what is known about its size.

    Attributes:
        kind: "tf.data", "PyDataset", "Pipeline", "TFRecords" (a path) or "source".
        data: the `tf.data.Dataset` (ending in a prefetch) or the `keras.utils.PyDataset`.
        steps: batches per epoch; None when unknown (a finite dataset Keras runs to its end)
            or infinite.
        infinite: the input repeats forever, so an epoch needs a `steps_per_epoch`.
        honours: the `tfpipe.fit` arguments this kind of input uses; others are warned about.
        image_encoding: how the images are stored ("jpeg", "png", "raw" or "auto") when the input
            reads tfpipe records or sources with one Image feature; None when unknown.
        batch_size: the size of every batch but an epoch's last, as declared (a Pipeline's
            `batch()`, a SequenceLoader's `batch_size`, the static batch dimension of a
            dataset); None when only the batches can tell.
        examples: examples in one pass over the data, when known (metadata, source length).
        pipeline: the `Pipeline` the input reads (for a Pipeline, a path or a source), which
            can locate the record behind a raw TensorFlow error; None for other kinds.
        data_kind: "images" when the schema has an Image feature, "tensors" when it has none
            (a table, lists, text); None when no schema is known.
        schema: the features the input holds, when known (a Pipeline's or a SequenceLoader's
            schema, a path's metadata, a source's); None for other kinds.
    """

    kind: str
    data: tf.data.Dataset | keras.utils.PyDataset
    steps: int | None
    infinite: bool = False
    honours: frozenset[str] = frozenset()
    image_encoding: str | None = None
    batch_size: int | None = None
    examples: int | None = None
    pipeline: Pipeline | None = None
    data_kind: str | None = None
    schema: Schema | None = None

    @property
    def service(self) -> DataService | None:
        """The tf.data service the input's Pipeline runs on (`Pipeline.distribute`), if any."""
        return None if self.pipeline is None else self.pipeline.service

    def batches(self, *, repeat: bool = False) -> Iterator[Any]:
        """The batches of one epoch, or of epoch after epoch with `repeat=True`."""
        if isinstance(self.data, tf.data.Dataset):
            return iter(self.data.repeat() if repeat and not self.infinite else self.data)
        total = self.data.num_batches
        if total is None:
            indices: Iterable[int] = itertools.count()
        else:
            indices = itertools.cycle(range(total)) if repeat else range(total)
        return (self.data[i] for i in indices)


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
) -> Input:
    """Turns any input tfpipe accepts into an `Input`: the one place that dispatches on kind.

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
    by_schema = names_paths(data) or isinstance(data, SourceBase)
    if (x is None) != (y is None) and not (by_schema and x is None):
        missing = "y" if y is None else "x"
        raise ValueError(
            f"x and y go together: pass {missing}=... too (the feature name(s) the model "
            f"{'predicts' if missing == 'y' else 'takes'}). Received: x={x!r}, y={y!r}"
        )
    if schema is not None and not names_paths(data):
        raise ValueError(
            f"schema= describes TFRecords named by a path, but {argument} is a "
            f"{type(data).__name__}, which carries its own schema: drop schema=, or pass the path"
        )
    if by_schema:
        return _default_pipeline(
            _readable(data, argument, schema),
            batch_size=batch_size,
            shuffle=shuffle,
            image_size=image_size,
            x=x,
            y=y,
            pairs=pairs,
            seed=seed,
        )

    if isinstance(data, Pipeline):
        data = _supervised(data, argument, x, y)
        return _from_dataset(
            data.build(),
            "Pipeline",
            steps_per_pass=data.batches_per_epoch(),
            prefetched=True,
            batch_size=data.batch_size,
            examples=data.examples_per_epoch(),
            pipeline=data,
            schema=data.schema,
        )
    if isinstance(data, tf.data.Dataset):
        if x is not None and y is not None:
            data = _select(data, argument, x, y)
        return _from_dataset(data, "tf.data")
    if isinstance(data, keras.utils.PyDataset):
        if x is not None:
            raise ValueError(
                f"x and y select features of example dicts, but {argument} is a "
                f"{type(data).__name__}, which yields its own (x, y) batches: drop x and y, or "
                f"pass a tfpipe.Pipeline, a source or a TFRecord path. Received: x={x!r}, y={y!r}"
            )
        steps = data.num_batches
        known = isinstance(data, SequenceLoader)
        schema = getattr(data, "schema", None)
        return Input(
            "PyDataset",
            data,
            steps,
            steps is None,
            honours=frozenset({"shuffle"}),
            batch_size=data.options.batch_size if known else None,
            examples=data.examples_per_epoch() if known else None,
            data_kind=_data_kind(data.schema) if known else None,
            schema=schema if isinstance(schema, Schema) else None,
        )
    raise TypeError(
        f"{argument} must be a tfpipe.Pipeline, a tf.data.Dataset, a keras.utils.PyDataset, "
        "a path (TFRecords, a folder of images) or a tfpipe source. "
        f"Received: {argument} of type {type(data).__name__}"
    )


def naming(*inputs: Input) -> contextlib.AbstractContextManager[None]:
    """`named_errors` over the Pipelines of `inputs` (other kinds cannot be searched)."""
    return named_errors(*(i.pipeline for i in inputs if i.pipeline is not None))


def _from_dataset(
    dataset: tf.data.Dataset,
    kind: str,
    *,
    steps_per_pass: int | None = None,
    honours: frozenset[str] = frozenset(),
    prefetched: bool = False,
    batch_size: int | None = None,
    examples: int | None = None,
    pipeline: Pipeline | None = None,
    schema: Schema | None = None,
) -> Input:
    """An Input over a dataset, ending in a prefetch; `steps_per_pass` (batches in one pass over
    the data, from metadata) sizes the epochs of a repeated dataset. A Pipeline's dataset is
    `prefetched` already (its last stage before the options) and declares its own length."""
    cardinality = int(dataset.cardinality())
    infinite = cardinality == tf.data.INFINITE_CARDINALITY
    steps = cardinality if cardinality >= 0 else steps_per_pass
    if not prefetched and type(dataset).__name__ != "_PrefetchDataset":
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    batch_size = batch_size or _static_batch_size(dataset.element_spec)
    return Input(
        kind,
        dataset,
        steps,
        infinite,
        honours,
        _image_encoding(schema),
        batch_size,
        examples,
        pipeline,
        _data_kind(schema),
        schema,
    )


def _static_batch_size(spec: Any) -> int | None:
    """The batch dimension every component of a dataset's elements declares, if one does."""
    shapes = [getattr(s, "shape", None) for s in tf.nest.flatten(spec)]
    sizes = {shape[0] for shape in shapes if shape is not None and shape.rank}
    return int(sizes.pop()) if len(sizes) == 1 and None not in sizes else None


def _image_encoding(schema: Schema | None) -> str | None:
    """The storage encoding of the schema's one Image feature; None for zero or several."""
    images = [f for f in (schema or {}).values() if isinstance(f, Image)]
    return images[0].encoding if len(images) == 1 else None


def _data_kind(schema: Schema | None) -> str | None:
    """What the data holds: "images" with an Image feature, else "tensors"; None unknown."""
    if schema is None:
        return None
    return "images" if any(isinstance(f, Image) for f in schema.values()) else "tensors"


@dataclasses.dataclass(frozen=True)
class Readable:
    """What a default Pipeline reads: resolved TFRecords or a source, with its schema."""

    data: ResolvedData | SourceBase
    schema: Schema
    where: str


def _readable(data: Any, argument: str, schema: Schema | None) -> Readable:
    """A path resolved once (records with their schema: given, the metadata's or inferred; a
    folder of images as a source), or a source as it is."""
    if isinstance(data, SourceBase):
        return Readable(data, data.schema, f"{argument} ({type(data).__name__})")
    resolved = resolve(data, argument=argument)
    where = f"{argument}={resolved.origin!r}"
    if resolved.image_folder is not None:
        source = random_access(resolved, schema, argument=argument)
        return Readable(source, source.schema, where)
    return Readable(resolved, schema_for(resolved, schema), where)


def _default_pipeline(
    readable: Readable,
    *,
    batch_size: int | None,
    shuffle: bool,
    image_size: tuple[int, int] | None,
    x: Names | None,
    y: Names | None,
    pairs: bool,
    seed: int | None = None,
) -> Input:
    """The default Pipeline over a TFRecord path or a source: shuffle, batch, select `x` and
    `y` (by default the one Image and the one ClassLabel, with `y` alone the one Image as `x`,
    or every other feature by name for a schema without Image;
    example dicts for another schema when not `pairs`), images as float32 in [0, 1]."""
    schema, where = readable.schema, readable.where
    images = [n for n, f in schema.items() if isinstance(f, Image)]
    labels = [n for n, f in schema.items() if isinstance(f, ClassLabel)]
    if x is None and len(images) == len(labels) == 1 and y is None:
        x, y = images[0], labels[0]
    if x is None and y is not None and not images:  # a table: x is every other feature
        x = {n: n for n in schema if n not in feature_names("y", y, where)}
    if x is None and y is not None:
        if len(images) != 1:
            raise SchemaError(
                f"{where}: y={y!r} alone takes the one Image feature as x, but the schema has "
                f"{len(images)} ({', '.join(images) or 'none'}): pass x=... too (the feature "
                "name(s) the model takes)"
            )
        x = images[0]
    if x is None or y is None:
        if pairs:
            raise SchemaError(
                f"{where}: without x and y, the default pipeline needs exactly one Image and "
                f"one ClassLabel feature (its x and y), but the schema has {schema}. Pass "
                "x=... and y=... (the feature name(s) the model takes and predicts), e.g. "
                f"x={next(iter(schema))!r}, y={list(schema)[-1]!r}"
                + ("" if images else f", or y={list(schema)[-1]!r} alone (x: every other feature)")
            )
    else:
        check_known(x, y, schema, where, "the schema")
    size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    fixed = all(None not in schema[n].decoded_shape[:2] for n in images)
    records = isinstance(readable.data, ResolvedData)
    pipeline = Pipeline(
        readable.data,
        schema=schema if records else None,
        image_size=None if fixed else image_size,
        rescale=1 / 255,
    )
    if shuffle:
        pipeline = pipeline.shuffle(seed=seed)
    pipeline = pipeline.batch(size)
    if x is not None:
        pipeline = pipeline.as_supervised(x, y)
    return _from_dataset(
        pipeline.build(),
        "TFRecords" if records else "source",
        honours=frozenset({"batch_size", "shuffle"}),
        prefetched=True,
        batch_size=size,
        examples=pipeline.examples_per_epoch(),
        pipeline=pipeline,
        schema=schema,
    )


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
        check_known(x, y, pipeline.schema, argument, "the schema")
    return pipeline.as_supervised(x, y)


def _select(dataset: tf.data.Dataset, argument: str, x: Names, y: Names) -> tf.data.Dataset:
    """A tf.data dataset of example dicts mapped to `(x, y)` pairs."""
    spec = dataset.element_spec
    if not isinstance(spec, Mapping):
        raise ValueError(
            f"x and y select features of example dicts, but {argument} yields "
            f"{type(spec).__name__}s: drop x and y, or yield dicts. Received: x={x!r}, y={y!r}"
        )
    check_known(x, y, list(spec), argument, "the dataset's examples")
    return dataset.map(plain(selector(x, y)), num_parallel_calls=tf.data.AUTOTUNE)
