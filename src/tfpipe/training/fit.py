"""`tfpipe.fit`: one training entry point that keeps the model fed and measures how well.

It runs in three phases over one `PreparedFit` (`tfpipe.training.prepared`):

    prepare(model, data, FitSettings) ──▶ PreparedFit: the inputs adapted once into Feeds (kind,
        steps, schema, batch size, identity), the arguments checked, the model alone timed
        on one full batch
    _train(model, prepared) ──▶ model.fit over the prepared input (resumed, distributed, or repeated
        pass after pass and prefetched), every callback hook timed (report=True)
    _report(prepared, run) ──▶ the input timed alone, then History.report, a `FitReport`

The mechanics are told in docs/guides/fit-and-report.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import keras
import tensorflow as tf

from tfpipe.distribute.sharding import DistributedFeed
from tfpipe.errors import TfpipeWarning
from tfpipe.loaders.service import PassCounter, aborting_collectives
from tfpipe.loaders.supervised import Names
from tfpipe.schema import Schema
from tfpipe.training.adapters import Feed
from tfpipe.training.backend import notes as backend_notes
from tfpipe.training.backend import strategy_of, trains_with_tensorflow
from tfpipe.training.breakdown import Breakdown
from tfpipe.training.faults import naming
from tfpipe.training.keras_internals import release_epoch_iterator, workarounds_for_workers
from tfpipe.training.map_costs import input_stages
from tfpipe.training.mixture_costs import time_sources
from tfpipe.training.model_probe import set_steps_per_execution
from tfpipe.training.prepared import FitSettings, PreparedFit, prepare
from tfpipe.training.report import FitReport
from tfpipe.training.resume import fit_from
from tfpipe.training.throughput import measure
from tfpipe.training.timing import Clock, Timings, WaitMeter

INPUT_PROBE_SECONDS = 2.0
STAGE_PROBE_SECONDS = 0.75
SOURCE_PROBE_SECONDS = 0.25
"""Each source of a mixture is timed alone for this long (its start-up not counted)."""


def fit(
    model: keras.Model,
    data: Any,
    *,
    x: Names | None = None,
    y: Names | None = None,
    validation: Any = None,
    epochs: int = 1,
    steps_per_epoch: int | None = None,
    callbacks: Sequence[keras.callbacks.Callback] | None = None,
    batch_size: int | None = None,
    report: bool = True,
    backup_dir: str | os.PathLike[str] | None = None,
    save_every: int | None = None,
    schema: Schema | None = None,
    **fit_kwargs: Any,
) -> keras.callbacks.History:
    """Trains `model` on any tfpipe input, avoiding the usual input mistakes, and measures it.

    What it does before, during and after `model.fit` (the model probe, `steps_per_execution`,
    one iterator for the run, the report's measurements, several workers, the tf.data
    service, JAX and PyTorch) is told in the guide "Fit and the report".

    Examples:
        >>> history = tfpipe.fit(model, "out/train", epochs=2, batch_size=8, verbose=0)
        tfpipe.fit report (TFRecords input, batches of 8, ...)
        ...
        >>> history.report.verdict in ("input-bound", "compute-bound")  # a reading, see FitReport
        True
        >>> table_model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        >>> table_model.compile("adam", "mse")
        >>> table = tfpipe.from_arrays({"features": np.ones((16, 3), np.float32),
        ...                             "price": np.arange(16, dtype=np.float32)})
        >>> history = tfpipe.fit(table_model, table, x="features", y="price", report=False,
        ...                      verbose=0)
        >>> history = tfpipe.fit(model, "out/train", backup_dir="ckpt", save_every=2, report=False,
        ...                      verbose=0)

    Args:
        model: a compiled `keras.Model` (built under a `tf.distribute` strategy or not).
        data: a `tfpipe.Pipeline`, a `tf.data.Dataset` of `(x, y)` batches (or of example
            dicts, with `x` and `y`), a `keras.utils.PyDataset` (e.g. `tfpipe.SequenceLoader`),
            a tfpipe source (`from_arrays`, ...), or any path `tfpipe.Pipeline` reads: a
            dataset prefix, TFRecord files (with or without tfpipe metadata), a glob, a folder
            of shards, a list of these, a TFDS folder, a folder of class folders of images. A
            path or a source is read by a default Pipeline that shuffles, batches, rescales
            images to [0, 1] and prefetches.
        x: the feature name(s) the model takes: a name, a list, or a dict of model input name
            -> feature name. For a path, a source, a Pipeline without `as_supervised` or a
            tf.data dataset of dicts; also applied to `validation`. Defaults to None (the one
            Image of a path or source; with `y` alone and no Image, a table, every feature but
            `y`, as a dict by name).
        y: the feature name(s) the model predicts, in the same forms. Defaults to None (the
            one ClassLabel of a path or source). A variable-length list (a `tf.RaggedTensor`)
            as `y`, or as `x` of a model input not declared `keras.Input(..., ragged=True)`,
            is a `SchemaError` naming the feature: read it with `Pipeline(pad=...)`.
        validation: the same kinds as `data`, evaluated after each epoch. When the class names
            of both are known (a Pipeline's or SequenceLoader's schema, a path's metadata), they
            must be the same: a `SchemaError` names the feature and both lists otherwise.
            Keras's name `validation_data=` is taken as `validation=` (but for a tuple of
            arrays `(x_val, y_val)`, passed to `model.fit` as it is). Defaults to None.
        epochs: number of epochs. Defaults to 1.
        steps_per_epoch: batches per epoch; inferred for a repeated Pipeline or path from the
            metadata and the batch size. Defaults to None (one pass over `data`).
        callbacks: Keras callbacks. Defaults to None.
        batch_size: batch size of the Pipeline built for a path or a source, a positive int
            (ignored, with a warning, for other inputs, which are already batched). Defaults to
            32 for a path or a source.
        report: time every callback hook of the run and the input alone, print the
            `FitReport` (with its `breakdown` of the training time by cause) and attach it.
            Defaults to True.
        backup_dir: a folder for backups that resume mid-epoch: weights, optimizer state and
            the input position `(epoch, batch)`, saved together atomically. Running the same
            call again after a kill loads the newest one and goes on at the next batch of the
            same epoch, with the batches an uninterrupted run has (`Pipeline.start_at`); a
            backup made with other data, batch size or seed, or with another optimizer, is
            refused, naming the difference, and one past `epochs` with a ValueError. Needs a
            seeded Pipeline, path (seed 0) or source, or a `SequenceLoader(seed=...)`, and no
            `steps_per_epoch`. The backups are removed
            when every epoch is trained. Under a multi-worker strategy the position counts
            global steps and only the chief's backup is kept: give every worker the same
            folder on shared storage; a backup made with another number of workers is
            refused. Defaults to None (no backups).
        save_every: save a backup every this many batches, counted from the start of the run.
            Defaults to None (once per epoch, with `backup_dir`).
        schema: the schema of the TFRecords a path `data` names (not `validation`'s). Defaults
            to None (the metadata's; without metadata, inferred as `tfpipe.Pipeline` infers it).
        **fit_kwargs: passed to `model.fit` (e.g. `verbose`, `class_weight`). `shuffle`
            applies to a path and a PyDataset; for tf.data inputs shuffle in the pipeline.
            `validation_split` is refused (it splits arrays in memory): pass `validation`.

    Returns:
        Keras's `History`, with `history.report` the `FitReport` (None when `report=False`).
    """
    settings = FitSettings(
        x=x,
        y=y,
        validation=validation,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        callbacks=callbacks,
        batch_size=batch_size,
        report=report,
        backup_dir=backup_dir,
        save_every=save_every,
        schema=schema,
        fit_kwargs=fit_kwargs,
    )
    prepared = prepare(model, data, settings)
    run = _train(model, prepared, timed=settings.report)
    run.history.report = None if run.timings is None else _report(prepared, run, run.timings)
    if run.history.report is not None:
        print(run.history.report)
    return run.history


@dataclasses.dataclass(frozen=True)
class _Run:
    """What training did: Keras's history, and what was measured for the report.

    Attributes:
        history: Keras's `History`.
        timings: every second of `model.fit` by part; None when not timed (`report=False`).
        cpu_busy: the share of this host's cores the process kept busy during training.
        notes: what the report adds (the passes of an input on the tf.data service).
        input_kept: the input was repeated, one iterator for the run (no restart per epoch).
    """

    history: keras.callbacks.History
    timings: Timings | None
    cpu_busy: float
    notes: tuple[str, ...]
    input_kept: bool


def _train(model: keras.Model, prepared: PreparedFit, *, timed: bool) -> _Run:
    """Trains as `prepared` says, every callback hook and train step timed when `timed` (by class
    name, each step once: `training.timing`); warns about what went wrong in the data."""
    plain = prepared.distributed is None and prepared.resumable is None
    meter = _wait_meter(prepared.train, model) if timed and plain else None
    clock = (
        Clock(prepared.probe.step_seconds, prepared.short_last_compiles, meter) if timed else None
    )
    callbacks = prepared.callbacks
    if clock is not None:
        callbacks = clock.around(callbacks, prepared.keras_kwargs.get("verbose", "auto"))
    passes = None if prepared.resumable is not None else _pass_counter(prepared, model)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    if clock is not None:
        clock.start()
    workarounds = _for_workers(model) if prepared.multi_worker else contextlib.nullcontext()
    try:
        with workarounds, naming(*prepared.inputs):
            history, steps, kept = _fit(
                model=model, prepared=prepared, callbacks=callbacks, passes=passes, meter=meter
            )
    finally:
        if prepared.probe.chosen:
            set_steps_per_execution(model, 1)
        release_epoch_iterator()
    timings = None if clock is None else clock.stop()
    cpu_busy = (time.process_time() - cpu_start) / ((time.perf_counter() - wall_start) * _cores())
    _warn_truncated(prepared.inputs)
    notes = _check_passes(prepared.train, passes, prepared.epochs * (steps or 0))
    return _Run(history=history, timings=timings, cpu_busy=cpu_busy, notes=notes, input_kept=kept)


@contextlib.contextmanager
def _for_workers(model: keras.Model) -> Iterator[None]:
    """Under a multi-worker strategy: Keras's workarounds, and a tf.data service worker lost
    for good ending the wait of any worker at an all-reduce (`aborting_collectives`)."""
    with workarounds_for_workers(model), aborting_collectives():
        yield


def _fit(
    model: keras.Model,
    prepared: PreparedFit,
    callbacks: list[keras.callbacks.Callback],
    passes: PassCounter | None,
    meter: WaitMeter | None,
) -> tuple[keras.callbacks.History, int | None, bool]:
    """Keras's `fit` over the prepared input, the steps per epoch it ran, and whether the input
    was repeated (one iterator for the run): resumed from the newest backup, split over the
    workers, or fed from this host (on the tf.data service pass after pass, else one iterator
    for the run), timed by `meter` or prefetched to the GPU."""
    train = prepared.train
    if prepared.resumable is not None and prepared.saver is not None:
        history = fit_from(
            model=model,
            resumable=prepared.resumable,
            saver=prepared.saver,
            epochs=prepared.epochs,
            callbacks=callbacks,
            **prepared.keras_kwargs,
        )
        return history, prepared.steps, False
    kept = False
    if passes is not None:
        dataset, steps = passes.repeat(train.data), train.steps  # a new service job a pass
        dataset = _feed(train, dataset, _accelerator(model), meter)
    elif prepared.distributed is None:
        dataset, steps, kept = train.one_iterator(
            prepared.steps, prepared.probe.steps_per_execution
        )
        dataset = _feed(train, dataset, _accelerator(model), meter)
    else:
        dataset, steps = (
            prepared.distributed.dataset,
            _distributed_steps(prepared.steps, prepared.distributed),
        )
    history = model.fit(
        dataset,
        epochs=prepared.epochs,
        steps_per_epoch=steps,
        callbacks=callbacks,
        **prepared.keras_kwargs,
    )
    return history, steps, kept


def _report(prepared: PreparedFit, run: _Run, timings: Timings) -> FitReport:
    """The `FitReport` of a timed run: the input timed alone (after training: iterating it
    before `fit` left its threads and buffers behind and slowed the training that followed,
    about 20% in benchmarks/bench_fit.py), with what `prepare` and the run measured."""
    train, probe, size = prepared.train, prepared.probe, prepared.batch_size
    with naming(train):
        input_alone = measure(
            train.batches(repeat=True),
            num_batches=50,
            warmup=2,
            max_seconds=INPUT_PROBE_SECONDS,
        )
        stages = input_stages(train.pipeline, input_alone, STAGE_PROBE_SECONDS)
        sources = time_sources(train.pipeline, size, SOURCE_PROBE_SECONDS)
    distributed = prepared.distributed
    per_step = (
        distributed.global_batch_size
        if distributed is not None
        else _examples_per_step(train, size)
    )
    step = timings.step_seconds  # None: no step was timed (none ran, or only the first)
    data_kind = train.data_kind or _data_kind_of(prepared.batch)
    return FitReport.build(
        input_alone=input_alone,
        model_examples_per_s=size / probe.step_seconds if probe.step_seconds else None,
        achieved_examples_per_s=per_step / step if step else None,
        input_kind=train.label,
        batch_size=size,
        steps_per_execution=probe.steps_per_execution,
        steps_per_execution_chosen=probe.chosen,
        measured_wait=timings.measured_wait_fraction,
        image_encoding=train.image_encoding,
        data_kind=data_kind,
        notes=probe.notes + run.notes + backend_notes(),
        cpu_busy=run.cpu_busy,
        service=None if train.service is None else train.service.address,
        breakdown=Breakdown.build(
            timings=timings,
            steps_per_execution=probe.steps_per_execution,
            input_stages=stages,
            input_kept=run.input_kept,
            data_kind=data_kind,
        ),
        echo_factor=train.echo_factor,
        sources=sources,
    )


def _warn_truncated(inputs: tuple[Feed, ...]) -> None:
    """Warns about the values a `Pipeline` or `SequenceLoader` with `truncate=True` cut to
    their pad length."""
    for source, argument in zip(inputs, ("data", "validation"), strict=False):
        for name, count in source.truncated().items():
            if count:
                warnings.warn(
                    f"{argument}: {count} value(s) of {name!r} were cut to their pad length "
                    "(pad=..., truncate=True), counting every read including "
                    "tfpipe.training.fit's probes; raise the pad length to keep them whole",
                    TfpipeWarning,
                    stacklevel=4,
                )


def _distributed_steps(given: int | None, distributed: DistributedFeed) -> int:
    """`steps_per_epoch` for a distributed input: at most the steps every worker can fill."""
    steps = distributed.steps_per_epoch
    if given is not None and given > steps:
        raise ValueError(
            f"steps_per_epoch={given} but each of the {distributed.num_workers} worker(s) can "
            f"fill only {steps} steps of {distributed.global_batch_size} examples per epoch. "
            f"Pass steps_per_epoch<={steps} or None"
        )
    return steps if given is None else given


def _cores() -> int:
    """The CPU cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _pass_counter(prepared: PreparedFit, model: keras.Model) -> PassCounter | None:
    """Counts the passes of a Pipeline on the tf.data service with dynamic sharding.

    Such a pass is one epoch while no service worker fails, and shorter when one does, so
    epochs are sized at one pass (each pass a new service job, as for any repeated input) and
    what each pass delivered is counted. A multi-replica strategy copies the dataset graph,
    which cannot hold the counter: then the input is repeated uncounted.
    """
    source, service = prepared.train, prepared.train.service
    if (
        service is None
        or service.mode != "dynamic"
        or prepared.steps is not None
        or source.steps is None
        or source.infinite
        or strategy_of(model).num_replicas_in_sync > 1
    ):
        return None
    return PassCounter(2 * prepared.epochs + 2)  # room for passes shortened by failed workers


def _check_passes(
    source: Feed, passes: PassCounter | None, trained_batches: int
) -> tuple[str, ...]:
    """Warns about the passes a failed service worker shortened; the report's note.

    Only the passes training used count: the prefetch reads ahead into the next one. The
    last pass started may still be running unless it is full.
    """
    pipeline, service = source.pipeline, source.service
    if passes is None or pipeline is None or service is None or source.examples is None:
        return ()
    started = passes.counts()
    ended = started[:-1] + [c for c in started[-1:] if c == source.examples]
    counts, batches = [], 0
    for count in ended:
        if batches >= trained_batches:
            break
        counts.append(count)
        batches += math.ceil(count / (pipeline.batch_size or 1))
    short = {i + 1: c for i, c in enumerate(counts) if c != source.examples}
    if short:
        warnings.warn(
            f"data: {len(short)} pass(es) over the data on the tf.data service at "
            f"{service.address} (pass: examples) {short} delivered fewer than the "
            f"{source.examples} examples of one epoch: a service worker failed and the rest "
            "of the files it was reading were lost for that pass (dynamic sharding reads each "
            "example at most once). Epochs keep their length, so the later ones start inside "
            "the next pass",
            TfpipeWarning,
            stacklevel=4,
        )
    return (
        f"the input ran on the tf.data service at {service.address} (dynamic sharding): the "
        f"{len(counts)} pass(es) over the data that ended delivered {counts} examples (one "
        f"epoch is {source.examples})",
    )


def _accelerator(model: keras.Model) -> str | None:
    """The GPU a single-device model trains on; None on CPU, when a strategy places data, or
    when Keras trains on another backend than TensorFlow (which copies batches itself)."""
    gpus = tf.config.list_logical_devices("GPU")
    if not gpus or not trains_with_tensorflow() or strategy_of(model).num_replicas_in_sync > 1:
        return None
    return str(gpus[0].name)


def _wait_meter(train: Feed, model: keras.Model) -> WaitMeter | None:
    """A meter of the time train steps are blocked on their next batch, for a tf.data input
    fed to one device from this host's memory (a device prefetch must be the last stage, and
    a multi-replica strategy or a PyDataset fetches batches where no stage can be added)."""
    if (
        not train.accepts_stages
        or _accelerator(model) is not None
        or strategy_of(model).num_replicas_in_sync > 1
        or not trains_with_tensorflow()
    ):
        return None
    return WaitMeter()


def _feed(train: Feed, data: Any, device: str | None, meter: WaitMeter | None) -> Any:
    """What `model.fit` reads of `train`: `data` timed by `meter`, else, when stages can be
    added to it, prefetched into `device`."""
    if meter is not None:
        return meter.wrap(data)
    return _prefetch_to_device(data, device) if train.accepts_stages else data


def _prefetch_to_device(data: tf.data.Dataset, device: str | None) -> tf.data.Dataset:
    """`data` with batches prefetched into `device`'s memory while the current step runs.

    Only for a repeated dataset (epochs sized by `steps_per_epoch`): the device stage hides
    the length of a finite one from Keras. A multi-replica strategy already copies each
    replica's batches to its device. The first batch is fetched once through the device
    stage; if that fails, training falls back to the host dataset with a warning rather than
    failing inside `model.fit`.
    """
    if device is None or data.cardinality() != tf.data.INFINITE_CARDINALITY:
        return data
    moved = data.apply(tf.data.experimental.prefetch_to_device(device))
    try:
        next(iter(moved))
    except (tf.errors.OpError, NotImplementedError, ValueError) as e:
        warnings.warn(
            f"prefetching batches to {device} failed ({e}); batches are copied to the device "
            "at each step instead",
            TfpipeWarning,
            stacklevel=6,
        )
        return data
    return moved


def _examples_per_step(source: Feed, batch_size: int) -> float:
    """Examples in an average training step: an epoch's examples over its steps when both are
    known (the short last batch counts as what it holds), else the batch size."""
    if source.examples and source.steps:
        return source.examples / source.steps
    return float(batch_size)


def _data_kind_of(batch: Any) -> str | None:
    """What a batch's model input holds: "images" when a part has rank 4 (batch, height,
    width, channels), "tensors" when every part has rank 2 or less; None when unsure (rank 3)."""
    x, _, _ = keras.utils.unpack_x_y_sample_weight(batch)
    ranks = [len(part.shape) for part in tf.nest.flatten(x)]
    if any(rank >= 4 for rank in ranks):
        return "images"
    return "tensors" if ranks and max(ranks) <= 2 else None
