"""What `tfpipe.fit` knows before it trains: its inputs adapted once, and what it decided.

    model, data, FitSettings (fit's arguments) ──prepare()──▶ PreparedFit
        check the model and the arguments ─▶ adapt data and validation once (kind, steps,
        schema, batch size) ─▶ steps per epoch, class lists, the resumable or distributed
        input ─▶ one full batch ─▶ the model alone timed on it ─▶ the backups' identity

Every later phase of `fit` (train, report) reads the `PreparedFit`; none looks at the arguments
again.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import keras

from tfpipe.checks import check_int
from tfpipe.distribute.sharding import DistributedFeed, Layout
from tfpipe.errors import SchemaError, TfpipeWarning
from tfpipe.labels import check_same_class_names
from tfpipe.loaders.supervised import Names, feature_names
from tfpipe.schema import Schema
from tfpipe.training.adapters import Feed, adapt, check_pairs
from tfpipe.training.backend import (
    check_steps_per_execution,
    compiles_each_batch_shape,
    data_only,
    strategy_of,
)
from tfpipe.training.faults import naming
from tfpipe.training.keras_internals import build_on
from tfpipe.training.lists import check_lists
from tfpipe.training.model_probe import (
    REPLICATED_NOTE,
    Probe,
    batch_level_callbacks,
    describe_structure,
    probe_model,
)
from tfpipe.training.resume import BackupCallback, Backups, Resumable, check_backup
from tfpipe.training.throughput import batch_size_of

SIZE_PROBE_BATCHES = 4


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitSettings:
    """The arguments of one `tfpipe.fit` call but the model and the data, as `fit` got them
    (see `tfpipe.fit` for each); the epochs and the batch size are checked when it is made.

    Attributes:
        x: the feature name(s) the model takes.
        y: the feature name(s) the model predicts.
        validation: the validation input; None without one.
        epochs: number of epochs.
        steps_per_epoch: batches per epoch; None for one pass over `data`.
        callbacks: the user's Keras callbacks.
        batch_size: the batch size of the Pipeline built for a path or a source.
        report: time the run and attach the `FitReport`.
        backup_dir: the folder of the backups that resume mid-epoch; None for none.
        save_every: batches between backups; None for once per epoch.
        schema: the schema of the TFRecords a path `data` names.
        fit_kwargs: the rest of fit's keyword arguments, for `model.fit` (left unchanged).
    """

    x: Names | None
    y: Names | None
    validation: Any
    epochs: int
    steps_per_epoch: int | None
    callbacks: Sequence[keras.callbacks.Callback] | None
    batch_size: int | None
    report: bool
    backup_dir: str | os.PathLike[str] | None
    save_every: int | None
    schema: Schema | None
    fit_kwargs: Mapping[str, Any]

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs)
        check_int("batch_size", self.batch_size, or_none=True)
        if "validation_split" in self.fit_kwargs:
            raise ValueError(
                "validation_split= splits arrays held in memory; tfpipe.fit streams its data: "
                "pass validation= instead, e.g. a split of the source (parts = "
                "source.split({'train': 0.8, 'val': 0.2}), validation=parts['val']). "
                "Received: validation_split="
                f"{self.fit_kwargs['validation_split']!r}"
            )
        given = self.fit_kwargs.get("validation_data")
        if given is None:
            return
        if self.validation is not None:
            raise ValueError(
                "validation= and validation_data= were both given: pass one (validation= "
                "takes what data= takes)"
            )
        if not isinstance(given, tuple):  # Keras's (x_val, y_val) arrays go to model.fit
            # A Pipeline, a path, a dataset...: checked and built as validation= is.
            object.__setattr__(self, "validation", given)
            rest = {k: v for k, v in self.fit_kwargs.items() if k != "validation_data"}
            object.__setattr__(self, "fit_kwargs", rest)

    @property
    def shuffle(self) -> Any:
        """`fit_kwargs`' `shuffle`; None when not given."""
        return self.fit_kwargs.get("shuffle")

    def keras_kwargs(self) -> dict[str, Any]:
        """A new dict of `fit_kwargs` but `shuffle`, which fit decides for `model.fit`."""
        return {name: value for name, value in self.fit_kwargs.items() if name != "shuffle"}


@dataclasses.dataclass(frozen=True)
class PreparedFit:
    """One `tfpipe.fit` call, prepared: the inputs adapted and every decision taken.

    Attributes:
        train: the training input (its kind, steps per pass, schema, batch size, Pipeline).
        validation: the validation input; None without one.
        epochs: epochs to train.
        steps: the `steps_per_epoch` to give Keras; None for one pass per epoch.
        batch: one batch of the input's true batch size (for the probe and the report).
        batch_size: examples in `batch`.
        probe: the model alone timed on `batch`, and its `steps_per_execution`.
        distributed: the input split over the workers of a multi-replica strategy; None when
            Keras places the batches (one replica, the tf.data service, other kinds).
        resumable: the loader `backup_dir` resumes; None without backups.
        saver: the callback that saves backups (first of `callbacks`); None without backups.
        callbacks: the callbacks of the run: the saver, then the user's.
        multi_worker: the model trains under a strategy with several workers.
        short_last_compiles: the first epoch's short last batch compiles the step again
            (`compiles_each_batch_shape`: JAX, PyTorch with `jit_compile=True`; epochs of one
            pass with a short last batch).
        keras_kwargs: the rest of `model.fit`'s arguments, with `validation_data`,
            `validation_steps` and `shuffle` set.
    """

    train: Feed
    validation: Feed | None
    epochs: int
    steps: int | None
    batch: Any
    batch_size: int
    probe: Probe
    distributed: DistributedFeed | None
    resumable: Resumable | None
    saver: BackupCallback | None
    callbacks: list[keras.callbacks.Callback]
    multi_worker: bool
    short_last_compiles: bool
    keras_kwargs: dict[str, Any]

    @property
    def inputs(self) -> tuple[Feed, ...]:
        """The training input, and the validation input when there is one."""
        return (self.train,) if self.validation is None else (self.train, self.validation)


def prepare(model: keras.Model, data: Any, settings: FitSettings) -> PreparedFit:
    """Checks `fit`'s arguments, adapts `data` and `validation` once, and times the model alone.

    `settings` holds the other arguments of `tfpipe.fit`. Every fault is raised here, before
    training: a wrong argument, an input of the wrong form, a batch that does not fit the
    model, train and validation class names that differ.
    """
    _check_model(model)
    check_steps_per_execution(model)
    data_only()
    save_every = check_backup(settings.backup_dir, settings.save_every, model)
    keras_kwargs, shuffle = settings.keras_kwargs(), settings.shuffle
    image_size = _image_size(model)
    _check_x_y(model, data, settings)
    x, y, callbacks = settings.x, settings.y, settings.callbacks
    train = adapt(
        data=data,
        batch_size=settings.batch_size,
        shuffle=shuffle is not False,
        image_size=image_size,
        argument="data",
        x=x,
        y=y,
        seed=None if settings.backup_dir is None else 0,
        schema=settings.schema,
    )
    _warn_ignored(train, "data", batch_size=settings.batch_size, shuffle=shuffle)
    steps = _steps(train, settings.steps_per_epoch, "data", "steps_per_epoch")
    resumable = None
    if settings.backup_dir is not None:
        resumable = train.resumable(
            strategy=strategy_of(model), steps_per_epoch=settings.steps_per_epoch
        )
    checked = None
    if settings.validation is not None:
        checked = _validation(train, settings, image_size=image_size, keras_kwargs=keras_kwargs)
    inputs = (train,) if checked is None else (train, checked)
    distributed = None if resumable is not None else _distributed(model, train)
    # Keras shuffles a PyDataset's batch order; a distributed or resumable loader (a
    # SequenceLoader shuffles itself) draws its own orders, the same in every run.
    keras_kwargs["shuffle"] = (
        train.shuffled_by_keras and shuffle is not False and not distributed and not resumable
    )
    with naming(*inputs):
        batch, size = full_batch(train)
    supervised = train.supervised
    check_lists(model, batch, *((x, y) if x is not None or supervised is None else supervised))
    probe = _probe(
        model=model,
        batch=batch,
        steps=steps or train.steps,
        tune=resumable is None,
        callbacks=callbacks,
        validation=checked,
    )
    saver = None
    if resumable is not None:
        with naming(*inputs):
            identity = resumable.loader.identity()
        backups = Backups(settings.backup_dir, identity, resumable.steps, strategy_of(model))  # type: ignore[arg-type]
        saver = BackupCallback(backups, save_every or resumable.steps)
    return PreparedFit(
        train=train,
        validation=checked,
        epochs=settings.epochs,
        steps=steps,
        batch=batch,
        batch_size=size,
        probe=probe,
        distributed=distributed,
        resumable=resumable,
        saver=saver,
        callbacks=[*([saver] if saver else []), *(callbacks or [])],  # saved before the user's
        multi_worker=Layout.of(strategy_of(model)).num_workers > 1,
        short_last_compiles=(
            compiles_each_batch_shape(model)
            and not steps  # epochs of one pass each, all ending with the same short batch
            and bool(train.examples and train.examples % size)
        ),
        keras_kwargs=keras_kwargs,
    )


def _validation(
    train: Feed,
    settings: FitSettings,
    *,
    image_size: tuple[int, int] | None,
    keras_kwargs: dict[str, Any],
) -> Feed:
    """`settings.validation` adapted (in order, batched as `validation_batch_size` or
    `batch_size`), its class names checked against `train`'s; sets Keras's `validation_data`
    and `validation_steps` in `keras_kwargs`."""
    validation_batch_size = check_int(
        "validation_batch_size", keras_kwargs.pop("validation_batch_size", None), or_none=True
    )
    checked = adapt(
        data=settings.validation,
        batch_size=settings.batch_size if validation_batch_size is None else validation_batch_size,
        shuffle=False,
        image_size=image_size,
        argument="validation",
        x=settings.x,
        y=settings.y,
    )
    if train.schema is not None and checked.schema is not None:
        check_same_class_names(train.schema, checked.schema, ("data", "validation"))
    _warn_ignored(checked, "validation", stacklevel=5, batch_size=validation_batch_size)
    keras_kwargs["validation_data"] = checked.data
    keras_kwargs["validation_steps"] = _steps(
        source=checked,
        given=keras_kwargs.pop("validation_steps", None),
        argument="validation",
        name="validation_steps",
        stacklevel=5,
    )
    return checked


def _probe(
    model: keras.Model,
    batch: Any,
    steps: int | None,
    tune: bool,
    callbacks: Sequence[keras.callbacks.Callback] | None,
    validation: Feed | None,
) -> Probe:
    """The model alone timed on `batch` (`probe_model`), or, under a multi-replica strategy,
    only built on it."""
    if strategy_of(model).num_replicas_in_sync > 1:
        build_on(model, batch)
        return Probe(0.0, model.steps_per_execution, False, (REPLICATED_NOTE,))
    return probe_model(
        model=model,
        batch=batch,
        steps=steps,
        tune=tune,
        batch_callbacks=batch_level_callbacks(callbacks or [], validation is not None),
    )


def _check_model(model: Any) -> None:
    if not isinstance(model, keras.Model):
        raise TypeError(f"model must be a keras.Model. Received: model={type(model).__name__}")
    if not model.compiled:
        raise ValueError(
            "model must be compiled before tfpipe.fit: call model.compile(optimizer, loss) first"
        )


def _image_size(model: keras.Model) -> tuple[int, int] | None:
    """The (height, width) of a model's single image input, when it declares one."""
    inputs = model.inputs if model.built and hasattr(model, "inputs") else None
    if not inputs or len(inputs) != 1 or len(inputs[0].shape) != 4:
        return None
    height, width = inputs[0].shape[1:3]
    return (height, width) if height and width else None


def _check_x_y(model: keras.Model, data: Any, settings: FitSettings) -> None:
    """Refuses `x` or `y` of the wrong form, a list of names whose length is not the model's
    number of inputs (outputs), and a Pipeline of example dicts without them, before any data
    is read: Keras's errors name none of these."""
    x, y = settings.x, settings.y
    for argument, names in (("x", x), ("y", y)):
        if names is not None:
            feature_names(argument, names, "tfpipe.training.fit")
    check_pairs(data, "data", x)
    check_pairs(settings.validation, "validation", x)
    if not model.built:
        return
    for argument, names, tensors, what in (
        ("x", x, getattr(model, "inputs", None), "input"),
        ("y", y, getattr(model, "outputs", None), "output"),
    ):
        if tensors and isinstance(names, list | tuple) and len(names) != len(tensors):
            hint = (
                "; to feed several scalar columns to one input, store them as one Tensor "
                "feature of shape (n,) (e.g. tfpipe.from_arrays({'features': matrix, ...}))"
                if len(tensors) == 1
                else ""
            )
            raise SchemaError(
                f"{argument}={names!r} names {len(names)} features, but the model has "
                f"{len(tensors)} {what}(s) {describe_structure(tensors)}: name one feature per "
                f"model {what}, in their order (or a dict keyed by their names){hint}"
            )


def _warn_ignored(source: Feed, argument: str, stacklevel: int = 4, **given: Any) -> None:
    """Warns about each given argument that the kind of input cannot use; `stacklevel`
    points the warning at the caller of `tfpipe.fit`."""
    where = {"batch_size": "batch", "shuffle": "shuffle"}
    for name, value in given.items():
        if value is not None and name not in source.honours:
            warnings.warn(
                f"{name}={value!r} is ignored: {argument} is a {source.label} input; "
                f"{where.get(name, name)} where it is built (e.g. tfpipe.Pipeline(...)."
                f"{where.get(name, name)}(...))",
                TfpipeWarning,
                stacklevel=stacklevel,
            )


def _steps(
    source: Feed, given: int | None, argument: str, name: str, stacklevel: int = 4
) -> int | None:
    """The steps per epoch to pass to Keras, so that an epoch never runs out of data."""
    if given is not None:
        given = check_int(name, given)
        if source.steps is not None and not source.infinite:
            if given > source.steps:
                raise ValueError(
                    f"{name}={given} but {argument} has {source.steps} batches per epoch: Keras "
                    f"would stop with 'Your input ran out of data'. Pass {name}<={source.steps} "
                    "or None, or repeat() the input"
                )
            if given < source.steps:
                warnings.warn(
                    f"{name}={given} covers {given} of the {source.steps} batches of {argument}: "
                    "epochs run across the end of the data and Keras cuts short the one that "
                    f"reaches it; pass {name}=None to use every batch each epoch",
                    TfpipeWarning,
                    stacklevel=stacklevel,
                )
        return int(given)
    if source.infinite:
        if source.steps is None:
            raise ValueError(
                f"{argument} repeats forever and its size is unknown: pass {name}=..., or a "
                "tfpipe.Pipeline or TFRecords path whose metadata gives the size"
            )
        return source.steps
    return None


def _distributed(model: keras.Model, source: Feed) -> DistributedFeed | None:
    """Under a multi-replica strategy, the input split over the workers so that each reads its
    own part and all run the same steps (`Feed.distributed`: a Pipeline's or a
    SequenceLoader's; other inputs are left to Keras, which shards them itself)."""
    strategy = strategy_of(model)
    if strategy.num_replicas_in_sync == 1:
        return None
    return source.distributed(strategy)


def full_batch(source: Feed) -> tuple[Any, int]:
    """A batch of the input's true batch size, and that size, for the probe and the report.

    The first batch alone can be the short last one of an epoch (a non-deterministic pipeline
    yields whichever batch is ready first), which skewed every rate of the report. The size is
    the declared one when a batch of it comes among the first few, else the largest of them.
    """
    largest, size = None, 0
    for batch in itertools.islice(source.batches(), SIZE_PROBE_BATCHES):
        examples = batch_size_of(batch)
        if examples > size:
            largest, size = batch, examples
        if examples == source.batch_size:
            break
    if largest is None:
        raise ValueError(f"the {source.label} input yielded no batches: it is empty")
    return (tuple(largest) if isinstance(largest, list) else largest), size
