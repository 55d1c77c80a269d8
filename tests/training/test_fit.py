"""tfpipe.fit: every input kind trains, sizes are inferred, probes leave the model alone."""

from __future__ import annotations

import gc
import math
import shutil
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from collection import collect_now, join_background_collections
from tfpipe.errors import DataNotFoundError, SchemaError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo
from tfpipe.training import model_probe
from tfpipe.training.adapters import adapt
from tfpipe.training.fit import (
    _accelerator,
    _examples_per_step,
    _prefetch_to_device,
)
from tfpipe.training.keras_internals import RELEASE_WAIT_S, release_epoch_iterator
from tfpipe.training.model_probe import model_state, probe_model
from tfpipe.training.prepared import full_batch
from tfpipe.training.report import FitReport
from tfpipe.training.throughput import Throughput
from with_backend import run_fresh

SIZE = (16, 16)
NUM_CLASSES = 3


pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


@pytest.fixture(scope="module")
def records(image_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The 36 images of `image_folder` as tfpipe TFRecords (variable image size)."""
    prefix = str(tmp_path_factory.mktemp("records") / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(image_folder), prefix, num_shards=2)
    return prefix


def tiny_cnn(**compile_kwargs: Any) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(NUM_CLASSES),
        ]
    )
    model.compile(
        "adam",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        **compile_kwargs,
    )
    return model


def arrays_dataset(count: int = 40, batch: int = 8) -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((count, *SIZE, 3), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, count)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def check_report(report: FitReport, kind: str, batch_size: int) -> None:
    assert isinstance(report, FitReport)
    assert report.input_kind == kind
    assert report.batch_size == batch_size
    for rate in (
        report.input_examples_per_s,
        report.model_examples_per_s,
        report.achieved_examples_per_s,
    ):
        assert math.isfinite(rate) and rate > 0
    assert 0.0 <= report.input_wait_fraction <= 1.0
    wait = report.input_wait_fraction
    headroom = report.input_examples_per_s / report.model_examples_per_s
    input_bound = wait > 0.2 or (wait > 0.1 and headroom < 1.5)  # FitReport.build's rule
    input_bound = input_bound and (report.input_wait_measured or headroom < 10)
    assert report.verdict == ("input-bound" if input_bound else "compute-bound")
    assert f"{report.model_examples_per_s:,.0f} examples/s" in report.advice[0]
    assert report.verdict in str(report)


@pytest.mark.parametrize("kind", ["TFRecords", "Pipeline", "tf.data", "PyDataset"])
def test_each_input_kind_trains(
    kind: str, records: str, image_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind == "TFRecords":
        data: Any = records
    elif kind == "Pipeline":
        data = (
            tfpipe.Pipeline(records, image_size=SIZE, rescale=1 / 255)
            .shuffle(seed=0)
            .batch(8)
            .as_supervised("image", "label")
        )
    elif kind == "tf.data":
        data = arrays_dataset()
    else:
        data = tfpipe.SequenceLoader(
            tfpipe.from_directory(image_folder), batch_size=8, image_size=SIZE, seed=0
        )
    model = tiny_cnn()
    history = tfpipe.fit(
        model, data, epochs=2, batch_size=8 if kind == "TFRecords" else None, verbose=0
    )
    assert len(history.history["loss"]) == 2
    assert all(math.isfinite(v) for v in history.history["loss"])
    check_report(history.report, kind, 8)
    stored_as = "auto" if kind in ("TFRecords", "Pipeline") else None  # as from_directory
    assert history.report.image_encoding == stored_as
    assert "tfpipe.fit report" in capsys.readouterr().out
    assert model.steps_per_execution == 1


def test_path_validation_and_no_report(records: str) -> None:
    model = tiny_cnn()
    history = tfpipe.fit(
        model, records, validation=records, batch_size=8, epochs=1, report=False, verbose=0
    )
    assert history.report is None
    assert int(model.optimizer.iterations.numpy()) == math.ceil(36 / 8)
    assert "val_loss" in history.history


@pytest.mark.slow
def test_validation_data_is_taken_as_validation(records: str) -> None:
    pipeline = tfpipe.Pipeline(records, image_size=SIZE, rescale=1 / 255).batch(8)
    pipeline = pipeline.as_supervised("image", "label")
    history = tfpipe.fit(
        tiny_cnn(), pipeline, validation_data=pipeline, epochs=1, report=False, verbose=0
    )
    assert len(history.history["val_loss"]) == 1  # Keras alone refuses an unbuilt Pipeline


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"validation": "v", "validation_data": "v"}, "validation= and validation_data= were"),
        ({"validation_split": 0.2}, r"pass validation= instead.*validation_split=0\.2$"),
    ],
)
def test_validation_given_twice_or_as_a_split_is_refused(
    records: str, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        tfpipe.fit(tiny_cnn(), records, **given)


def test_steps_per_epoch_inferred_for_a_repeated_pipeline(records: str) -> None:
    pipeline = (
        tfpipe.Pipeline(records, image_size=SIZE, rescale=1 / 255)
        .shuffle(seed=0)
        .repeat()
        .batch(8)
        .as_supervised("image", "label")
    )
    model = tiny_cnn()
    history = tfpipe.fit(model, pipeline, epochs=2, report=False, verbose=0)
    assert len(history.history["loss"]) == 2
    assert int(model.optimizer.iterations.numpy()) == 2 * math.ceil(36 / 8)


class SeenIds(keras.layers.Layer):
    """Passes x through; in training, adds up a one-hot count of the ids in column 0."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def build(self, shape: Any) -> None:
        self.seen = self.add_weight(
            shape=(self.count,), initializer="zeros", trainable=False, name="seen"
        )

    def call(self, x: Any, training: bool = False) -> Any:
        if training:
            ids = tf.cast(x[:, 0], tf.int32)
            self.seen.assign_add(tf.reduce_sum(tf.one_hot(ids, self.count), axis=0))
        return x


class IdsPerEpoch(keras.callbacks.Callback):
    """How often each id was trained on, epoch by epoch."""

    def __init__(self, layer: SeenIds) -> None:
        super().__init__()
        self.layer = layer
        self.epochs: list[np.ndarray] = []

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.epochs.append(np.zeros(self.layer.count))

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.epochs[-1] += self.layer.seen.numpy()
        self.layer.seen.assign(np.zeros(self.layer.count))


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_each_example_once_per_epoch_with_one_iterator_for_the_run(
    steps_per_execution: int,
) -> None:
    # 36 ids in batches of 8: 5 steps, the last one partial. tfpipe.fit repeats a finite
    # dataset so that Keras keeps one iterator; with 2 steps per execution (not a divisor of
    # 5) it must not, or epochs would drift across passes.
    count = 36
    layer = SeenIds(count)
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(layer(inputs)))
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    x = np.stack([np.arange(count), np.ones(count)], axis=1).astype("float32")
    data = (
        tf.data.Dataset.from_tensor_slices((x, np.zeros(count, "float32")))
        .shuffle(count, seed=0, reshuffle_each_iteration=True)
        .batch(8)
    )
    ids = IdsPerEpoch(layer)
    tfpipe.fit(model, data, epochs=3, callbacks=[ids], report=False, verbose=0)
    assert len(ids.epochs) == 3
    for epoch in ids.epochs:
        np.testing.assert_array_equal(epoch, np.ones(count))


def test_a_finite_dataset_is_repeated_with_one_pass_per_epoch() -> None:
    # Keras then keeps one iterator for the run: no restart (and no ~3 s stall releasing an
    # autotuned iterator) between epochs.
    five = adapt(arrays_dataset(count=36))
    dataset, steps, endless = five.one_iterator(None, steps_per_execution=1)
    assert steps == 5 and endless and dataset.cardinality() == tf.data.INFINITE_CARDINALITY
    two_passes = [len(x) for x, _ in dataset.take(10)]
    assert two_passes == [8, 8, 8, 8, 4] * 2
    assert five.one_iterator(None, steps_per_execution=2) == (five.data, None, False)
    assert five.one_iterator(3, steps_per_execution=1) == (five.data, 3, False)


def test_batches_prefetched_to_a_device_train() -> None:
    # On a GPU machine fit prefetches to "/gpu:0"; the same stage on the CPU device must give
    # batches on that device that Keras trains on. CPU-only: no device stage at all.
    # Only a repeated dataset gets the stage: it hides the length of a finite one from Keras.
    finite = arrays_dataset()
    assert _prefetch_to_device(finite, "/cpu:0") is finite
    data = finite.repeat()
    assert _prefetch_to_device(data, _accelerator(tiny_cnn())) is data
    moved = _prefetch_to_device(data, "/cpu:0")
    assert moved is not data
    x, _ = next(iter(moved))
    assert x.device.endswith("CPU:0")
    history = tiny_cnn().fit(moved, epochs=2, steps_per_epoch=5, shuffle=False, verbose=0)
    assert all(math.isfinite(v) for v in history.history["loss"])


class SlowEpochEnd(keras.utils.PyDataset):
    """4 batches of 8 tiny images; its work between epochs (a reshuffle, say) takes `pause` s."""

    def __init__(self, pause: float) -> None:
        super().__init__()
        self.pause = pause
        self.x = np.zeros((32, *SIZE, 3), np.float32)
        self.y = np.zeros(32, np.int64)

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[index * 8 : (index + 1) * 8], self.y[index * 8 : (index + 1) * 8]

    def on_epoch_end(self) -> None:
        time.sleep(self.pause)


def test_report_counts_the_input_pausing_between_epochs() -> None:
    # Only the first execution of the run is left out of the achieved rate: the input's 0.4 s
    # between epochs 1-2 and 2-3 is waiting for input, which the report must see.
    history = tfpipe.fit(tiny_cnn(), SlowEpochEnd(0.4), epochs=3, verbose=0)
    timed_steps = 3 * 4 - 1
    assert history.report.achieved_examples_per_s <= timed_steps * 8 / 0.8


def test_repeated_dataset_of_unknown_size_needs_steps() -> None:
    with pytest.raises(ValueError, match=r"repeats forever.*steps_per_epoch"):
        tfpipe.fit(tiny_cnn(), arrays_dataset().repeat(), verbose=0)
    model = tiny_cnn()
    tfpipe.fit(model, arrays_dataset().repeat(), steps_per_epoch=3, report=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 3


def test_steps_beyond_finite_data_is_an_error_and_fewer_warn() -> None:
    with pytest.raises(ValueError, match="steps_per_epoch=9 but data has 5 batches"):
        tfpipe.fit(tiny_cnn(), arrays_dataset(), steps_per_epoch=9, verbose=0)
    with pytest.warns(TfpipeWarning, match="covers 2 of the 5 batches"):
        tfpipe.fit(tiny_cnn(), arrays_dataset(), steps_per_epoch=2, report=False, verbose=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 16}, "batch_size=16 is ignored: data is a tf.data input"),
        ({"shuffle": True}, "shuffle=True is ignored: data is a tf.data input"),
    ],
)
def test_arguments_that_cannot_apply_warn(kwargs: dict[str, Any], message: str) -> None:
    with pytest.warns(TfpipeWarning, match=message):
        tfpipe.fit(tiny_cnn(), arrays_dataset(), report=False, verbose=0, **kwargs)


def test_users_steps_per_execution_is_left_alone() -> None:
    model = tiny_cnn(steps_per_execution=2)
    history = tfpipe.fit(model, arrays_dataset(), verbose=0)
    assert history.report.steps_per_execution == 2
    assert not history.report.steps_per_execution_chosen
    assert model.steps_per_execution == 2


def test_model_probe_leaves_weights_and_optimizer_state_unchanged() -> None:
    model = tiny_cnn()
    model.fit(
        arrays_dataset(), shuffle=False, verbose=0
    )  # non-zero optimizer moments and metric totals
    before = [v.numpy().copy() for v in model_state(model)]
    batch = next(iter(arrays_dataset()))
    probe = probe_model(model, batch, steps=5)
    after = [v.numpy() for v in model_state(model)]
    assert probe.step_seconds > 0
    assert len(before) == len(after) > 0
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(old, new)


def test_model_probe_builds_an_untrained_model_and_restores_it() -> None:
    model = tiny_cnn()
    weights = [w.copy() for w in model.get_weights()]
    probe_model(model, next(iter(arrays_dataset())), steps=5)
    assert model.optimizer.built
    assert int(model.optimizer.iterations.numpy()) == 0
    for old, new in zip(weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(old, new)


def test_path_without_metadata_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"names no data.*metadata file .*nothing\.json"):
        tfpipe.fit(tiny_cnn(), str(tmp_path / "nothing"), verbose=0)


def test_wrong_structure_for_the_model_is_a_clear_error() -> None:
    images_only = arrays_dataset().map(lambda x, y: {"pixels": x})
    with pytest.raises(SchemaError, match="do not fit the model"):
        tfpipe.fit(tiny_cnn(), images_only, verbose=0)
    wrong_shape = tf.data.Dataset.from_tensor_slices(
        (np.zeros((8, 5, 5, 1), np.float32), np.zeros(8, np.int64))
    ).batch(4)
    with pytest.raises(SchemaError, match=r"float32\[4, 5, 5, 1\].*float32\[None, 16, 16, 3\]"):
        tfpipe.fit(tiny_cnn(), wrong_shape, verbose=0)


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="epochs must be a positive int"):
        tfpipe.fit(tiny_cnn(), arrays_dataset(), epochs=0)
    with pytest.raises(TypeError, match=r"data must be a tfpipe\.Pipeline"):
        tfpipe.fit(tiny_cnn(), [1, 2, 3])
    uncompiled = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match=r"model\.compile"):
        tfpipe.fit(uncompiled, arrays_dataset())


def short_batch_first(count: int = 36, batch: int = 8) -> tf.data.Dataset:
    """Batches of 8 whose first is the short last one (4), as a non-deterministic pipeline
    may yield them; no static batch dimension tells the true size."""
    batches = arrays_dataset(count, batch)
    return batches.skip(count // batch).concatenate(batches.take(count // batch))


@pytest.mark.slow
@pytest.mark.fault(
    "short last batch yielded first",
    reader="tfpipe.fit (FitReport)",
    outcome="report uses the true batch size and counts examples",
)
def test_report_takes_the_true_batch_size_not_the_first_batch() -> None:
    data = short_batch_first()
    assert [len(x) for x, _ in data] == [4, 8, 8, 8, 8]
    batch, size = full_batch(adapt(data))
    assert size == 8 and len(batch[0]) == 8
    history = tfpipe.fit(tiny_cnn(), data, epochs=2, verbose=0)
    assert history.report.batch_size == 8
    assert "batches of 8" in str(history.report)


def test_inputs_declare_their_batch_size_and_examples(records: str, image_folder: Path) -> None:
    pipeline = tfpipe.Pipeline(records, image_size=SIZE).batch(8).as_supervised("image", "label")
    loader = tfpipe.SequenceLoader(
        tfpipe.from_directory(image_folder), batch_size=8, image_size=SIZE
    )
    dropped = arrays_dataset().unbatch().batch(8, drop_remainder=True)
    declared = {
        "Pipeline": adapt(pipeline),
        "PyDataset": adapt(loader),
        "TFRecords": adapt(records, batch_size=8, image_size=SIZE),
        "tf.data": adapt(dropped),
    }
    for kind, source in declared.items():
        assert (source.label, source.batch_size) == (kind, 8)
    assert [declared[k].examples for k in ("Pipeline", "PyDataset", "TFRecords")] == [36] * 3
    assert _examples_per_step(declared["Pipeline"], 8) == 36 / 5  # the last batch holds 4
    assert adapt(arrays_dataset()).batch_size is None  # the last batch is short: not static
    assert _examples_per_step(adapt(arrays_dataset()), 8) == 8


@pytest.mark.slow
@pytest.mark.fault(
    "records without metadata (epoch of unknown length)",
    reader="tfpipe.training.fit",
    outcome="steps_per_execution stays 1, and the report says why",
)
def test_unknown_epoch_length_keeps_one_step_per_execution(
    records: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Steps count as short and any larger value as a gain: only the unknown length stops it.
    monkeypatch.setattr(model_probe, "SHORT_STEP_S", 1e3)
    monkeypatch.setattr(model_probe, "TARGET_EXECUTION_S", 1e3)
    monkeypatch.setattr(model_probe, "MIN_GAIN", -1e9)
    schema = DatasetInfo.load(records).schema
    # Plain file names: no tfpipe shard names, so no metadata is found for them.
    shards = []
    for k, shard in enumerate(sorted(Path(records).parent.glob("train-*.tfrecord"))):
        shards.append(str(shutil.copy(shard, tmp_path / f"part{k}.tfrecord")))
    pipeline = (
        tfpipe.Pipeline(shards, schema=schema, image_size=SIZE, rescale=1 / 255)
        .batch(8)
        .as_supervised("image", "label")
    )
    assert adapt(pipeline).steps is None
    history = tfpipe.fit(tiny_cnn(), pipeline, epochs=2, verbose=0)
    assert (history.report.steps_per_execution, history.report.steps_per_execution_chosen) == (
        1,
        False,
    )
    assert "the length of an epoch is unknown" in history.report.advice[-1]
    known = tfpipe.fit(tiny_cnn(), records, batch_size=4, epochs=1, verbose=0)  # 9 steps
    assert (known.report.steps_per_execution, known.report.steps_per_execution_chosen) == (3, True)
    assert not any("unknown" in line for line in known.report.advice)


class BatchCounter(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.batches += 1


@pytest.mark.fault(
    "user callbacks that act on single batches",
    reader="tfpipe.training.fit",
    outcome="steps_per_execution stays 1, and the report names the callbacks",
)
@pytest.mark.fault(
    "Keras's fit stopped by steps_per_epoch (tfpipe.fit's repeated input) or by "
    "stop_training (the model probe) leaves its tf.data iterator in a reference cycle",
    reader="tfpipe.training.fit",
    outcome="the iterator is freed before fit returns, not by a later garbage collection that "
    "could stall whatever runs then (seconds under load)",
)
@pytest.mark.parametrize("report", [True, False])
def test_fit_leaves_no_iterator_of_its_input_alive(report: bool, short_probes: None) -> None:
    """Keras's `fit` stopped by `steps_per_epoch` (and the model probe, by `stop_training`)
    left its tf.data iterator in a reference cycle, alive until a later garbage collection."""
    data = arrays_dataset(count=40, batch=4)
    collect_now()
    gc.disable()
    try:
        tfpipe.fit(tiny_cnn(), data, epochs=2, verbose=0, report=report)
        left = [o for o in gc.get_objects() if isinstance(o, tf.data.Iterator)]
    finally:
        gc.enable()
    assert left == []


@pytest.mark.fault(
    "deleting an autotuned tf.data iterator blocks for up to 60 s (TensorFlow's autotuning "
    "thread, woken before its cancellation is marked done, sleeps out its period)",
    reader="tfpipe.training.fit",
    outcome="fit frees its input's iterator in a thread of its own and waits for it at most "
    "RELEASE_WAIT_S (1 s); the delete finishes in the background",
)
def test_a_delete_that_blocks_does_not_hold_up_the_release() -> None:
    """A finalizer that blocks without the GIL, as TensorFlow's delete of an iterator does:
    the release returns after `RELEASE_WAIT_S`, and the object is freed in the background."""
    freed = threading.Event()

    class SlowToFree:
        def __init__(self) -> None:
            self.cycle = self

        def __del__(self) -> None:
            time.sleep(3 * RELEASE_WAIT_S)
            freed.set()

    join_background_collections()
    gc.disable()  # no automatic collection may free it first, on this thread
    try:
        SlowToFree()
        started = time.perf_counter()
        collector = release_epoch_iterator()
        waited = time.perf_counter() - started
        assert RELEASE_WAIT_S * 0.9 <= waited < 2.5 * RELEASE_WAIT_S
        assert not freed.is_set()
        collector.join(30)
    finally:
        gc.enable()
    assert freed.is_set() and not collector.is_alive()


@pytest.mark.parametrize("repeated_by", ["fit", "the user"])
def test_the_report_knows_when_one_iterator_read_the_whole_run(
    repeated_by: str, short_probes: None
) -> None:
    """A finite dataset (repeated by tfpipe.fit) or one the user repeated (with
    steps_per_epoch): Keras keeps one iterator, so the epoch restarts are its own work."""
    data = arrays_dataset(count=40, batch=4)
    if repeated_by == "the user":
        history = tfpipe.fit(tiny_cnn(), data.repeat(), epochs=3, steps_per_epoch=10, verbose=0)
    else:
        history = tfpipe.fit(tiny_cnn(), data, epochs=3, verbose=0)
    detail = history.report.breakdown["epoch restarts"].detail
    assert detail.endswith("Keras's work between epochs, one input iterator"), detail
    assert not [line for line in history.report.breakdown.advice if "starts over" in line]


def test_batch_level_callbacks_keep_one_step_per_execution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Steps count as short and any larger value as a gain: only the callbacks stop it.
    monkeypatch.setattr(model_probe, "SHORT_STEP_S", 1e3)
    monkeypatch.setattr(model_probe, "TARGET_EXECUTION_S", 1e3)
    monkeypatch.setattr(model_probe, "MIN_GAIN", -1e9)
    counter = BatchCounter()
    checkpoint = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "{epoch}-{batch}.weights.h5"), save_weights_only=True, save_freq=1
    )
    data = arrays_dataset(count=40, batch=4)  # 10 steps
    history = tfpipe.fit(tiny_cnn(), data, callbacks=[counter, checkpoint], verbose=0)
    assert counter.batches == 10
    assert len(list(tmp_path.glob("*.weights.h5"))) == 10
    report = history.report
    assert (report.steps_per_execution, report.steps_per_execution_chosen) == (1, False)
    assert "BatchCounter (on_train_batch_end), ModelCheckpoint(save_freq=1)" in report.advice[-1]
    assert "BatchCounter" in str(report)
    # A checkpoint per epoch leaves tfpipe free to choose (5 divides the 10 steps).
    per_epoch = keras.callbacks.ModelCheckpoint(str(tmp_path / "last.keras"))
    tuned = tfpipe.fit(tiny_cnn(), data, callbacks=[per_epoch], verbose=0).report
    assert (tuned.steps_per_execution, tuned.steps_per_execution_chosen) == (5, True)


def test_which_callbacks_act_on_single_batches(tmp_path: Path) -> None:
    class OnTest(keras.callbacks.Callback):
        def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
            pass

    board = keras.callbacks.TensorBoard
    callbacks = [
        keras.callbacks.EarlyStopping(),
        keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras")),
        keras.callbacks.BackupAndRestore(str(tmp_path / "b"), save_freq=3),
        board(str(tmp_path / "a")),
        board(str(tmp_path / "b"), update_freq="batch"),
        board(str(tmp_path / "c"), profile_batch=2),
        keras.callbacks.LambdaCallback(on_train_batch_begin=lambda batch, logs: None),
        OnTest(),
    ]
    expected = [
        "BackupAndRestore(save_freq=3)",
        "TensorBoard(update_freq=1)",
        "TensorBoard(profile_batch)",
        "LambdaCallback (on_train_batch_begin)",
    ]
    found = model_probe.batch_level_callbacks(callbacks, validating=False)
    assert found == expected
    validating = model_probe.batch_level_callbacks(callbacks, validating=True)
    assert validating == [*expected, "OnTest (on_test_batch_end)"]


@pytest.mark.fault(
    "bool, NaN, inf, 0 or negative numeric argument",
    reader="tfpipe.fit, tfpipe.benchmark",
    outcome="ValueError naming the argument and the value",
)
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda d, r: tfpipe.fit(tiny_cnn(), r, batch_size=0), r"Received: batch_size=0$"),
        (lambda d, r: tfpipe.fit(tiny_cnn(), r, batch_size=True), r"Received: batch_size=True"),
        (lambda d, r: tfpipe.fit(tiny_cnn(), d, epochs=True), r"Received: epochs=True"),
        (lambda d, r: tfpipe.fit(tiny_cnn(), d, steps_per_epoch=2.5), r"steps_per_epoch=2\.5"),
        (
            lambda d, r: tfpipe.fit(tiny_cnn(), r, validation=r, validation_batch_size=-8),
            r"validation_batch_size must be a positive int or None\. Received: validation_b",
        ),
        (lambda d, r: tfpipe.benchmark(d, batches=True), r"Received: batches=True"),
        (lambda d, r: tfpipe.benchmark(d, warmup=-1), r"warmup must be a non-negative int"),
        (lambda d, r: tfpipe.benchmark(d, max_seconds=math.nan), r"max_seconds=nan"),
        (lambda d, r: tfpipe.benchmark(r, batch_size=0), r"Received: batch_size=0$"),
        (lambda d, r: tfpipe.benchmark(r, image_size=(16, 0)), r"image_size=\(16, 0\)"),
    ],
)
def test_numeric_arguments_refuse_bools_nan_inf_and_non_positive(
    records: str, call: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        call(arrays_dataset(), records)


def report_of(
    input_rate: float, achieved: float, kind: str, image_encoding: str | None = None
) -> FitReport:
    """A report of batches of 64 for a model that consumes 1,000 examples/s alone."""
    return FitReport.build(
        input_alone=Throughput(input_rate, input_rate / 64, 0.1, 10, 640),
        model_examples_per_s=1000.0,
        achieved_examples_per_s=achieved,
        input_kind=kind,
        batch_size=64,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
        image_encoding=image_encoding,
    )


def test_an_estimated_wait_does_not_overrule_a_far_faster_input() -> None:
    # The run: the input alone 51x faster than the model; fit's achieved rate 24% below
    # the model alone's only because the model's probe ran while the machine was quieter.
    rates = {
        "input_alone": Throughput(51_075.0, 51_075.0 / 64, 0.1, 50, 3200),
        "model_examples_per_s": 993.0,
        "achieved_examples_per_s": 755.0,
        "input_kind": "Pipeline",
        "batch_size": 64,
        "steps_per_execution": 1,
        "steps_per_execution_chosen": False,
    }
    measured = FitReport.build(**rates, measured_wait=0.02)
    assert (measured.verdict, measured.input_wait_fraction) == ("compute-bound", 0.02)
    assert measured.input_wait_measured
    assert "2% of the train steps' time, measured" in str(measured)
    estimated = FitReport.build(**rates)
    assert estimated.verdict == "compute-bound" and not estimated.input_wait_measured
    assert estimated.input_wait_fraction == pytest.approx(1 - 755 / 993)
    assert "is not put down to the input, which alone is 51x faster" in estimated.advice[1]
    assert "estimated (1 - achieved / model alone)" in str(estimated)
    # A measured wait is the input's, however fast the input is alone (it competes for the CPU).
    busy = FitReport.build(**rates, measured_wait=0.4)
    assert busy.verdict == "input-bound"


SLOW_BATCH_S = 0.2  # an input this slow is input-bound even at 7x the model's ~20 ms step


def wide_mlp() -> keras.Model:
    """A classifier of 256 floats whose train step on 32 of them takes ~20 ms on one core."""
    model = keras.Sequential(
        [
            keras.Input((256,)),
            keras.layers.Dense(1024, activation="relu"),
            keras.layers.Dense(1024, activation="relu"),
            keras.layers.Dense(NUM_CLASSES),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("speed", ["slow", "fast"])
def test_the_input_wait_is_measured_where_the_step_waits(speed: str) -> None:
    """A tf.data input 200 ms per batch behind a model of ~20 ms per step waits most of each
    step (still when a busy machine makes the model's steps several times slower); one served
    from memory waits for nothing (a fetch from its prefetch buffer costs a little: the
    model's steps are long enough to make that small)."""
    rng = np.random.default_rng(0)
    batches = 5 if speed == "slow" else 10  # each slow one sleeps: 2 epochs of 5 are enough
    x = rng.random((32 * batches, 256), dtype=np.float32)
    data = tf.data.Dataset.from_tensor_slices((x, np.arange(32 * batches) % NUM_CLASSES)).batch(32)
    if speed == "slow":
        sleep = lambda *batch: time.sleep(SLOW_BATCH_S) or 0  # noqa: E731
        data = data.map(lambda *batch: (tf.py_function(sleep, batch, tf.int32), batch)[1])
    else:
        data = data.cache().prefetch(tf.data.AUTOTUNE)
    report = tfpipe.fit(wide_mlp(), data, epochs=2, verbose=0).report
    assert report.input_wait_measured, report
    assert "blocked on the next batch" in str(report)
    if speed == "slow":
        assert report.verdict == "input-bound" and report.input_wait_fraction > 0.15, report
        # 8 steps timed (each epoch's first is start-up or a restart), each waiting 200 ms
        # less the model's step: on average at least 60 ms, so a step of up to 140 ms passes.
        timed = 2 * (batches - 1)
        assert report.breakdown["input wait"].seconds > 0.3 * timed * SLOW_BATCH_S, report
    else:
        assert report.verdict == "compute-bound" and report.input_wait_fraction < 0.1, report


@pytest.mark.parametrize(
    ("input_rate", "achieved", "verdict", "advice"),
    [
        (300.0, 250.0, "input-bound", "input alone is slower than the model"),
        (3000.0, 500.0, "input-bound", "competes with the model for the CPU"),
        (3000.0, 950.0, "compute-bound", "the input keeps up"),
        (1200.0, 990.0, "compute-bound", "only 1.2x faster than the model"),
        (1200.0, 850.0, "input-bound", "competes with the model for the CPU"),  # little headroom
        (3000.0, 850.0, "compute-bound", "the input keeps up"),  # same wait, ample headroom
    ],
)
def test_report_verdict_and_advice_follow_the_numbers(
    input_rate: float, achieved: float, verdict: str, advice: str
) -> None:
    report = report_of(input_rate, achieved, "PyDataset")
    assert report.verdict == verdict
    assert report.input_wait_fraction == pytest.approx(1 - achieved / 1000)
    assert any(advice in line for line in report.advice)
    assert f"{input_rate:,.0f} examples/s alone" in report.advice[0]


@pytest.mark.parametrize(
    ("encoding", "advice"),
    [
        ("jpeg", "store raw pixels at training size"),
        (
            "auto",
            "store raw pixels at training size (tfpipe write --image-size HxW writes raw "
            "pixels: no decode at all), decode JPEGs at reduced scale",
        ),
        ("raw", "the images are raw pixels already, so nothing is left to decode"),
        (None, "store images at training size"),
    ],
)
def test_report_advice_follows_how_images_are_stored(encoding: str | None, advice: str) -> None:
    # Input fast alone but slowing training: decode less, which depends on the storage.
    report = report_of(3000.0, 500.0, "TFRecords", image_encoding=encoding)
    assert report.image_encoding == encoding
    assert "competes with the model for the CPU: " + advice in report.advice[1]


def test_inputs_know_how_their_images_are_stored(records: str) -> None:
    pipeline = tfpipe.Pipeline(records, image_size=SIZE).batch(8)
    assert pipeline.schema is not None and pipeline.schema["image"].encoding == "auto"
    assert adapt(pipeline).image_encoding == "auto"
    assert adapt(records, image_size=SIZE).image_encoding == "auto"
    assert adapt(arrays_dataset()).image_encoding is None


MIRRORED = textwrap.dedent(
    """
    import os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras, tfpipe

    N = 36
    class Seen(keras.layers.Layer):
        # The example ids of the current step, summed over replicas.
        def build(self, shape):
            self.seen = self.add_weight(shape=(N,), initializer="zeros", trainable=False,
                                        aggregation="sum", name="seen")
        def call(self, x, training=False):
            if training:
                ids = tf.cast(x[:, 0], tf.int32)
                self.seen.assign(tf.reduce_sum(tf.one_hot(ids, N), axis=0))
            return x

    class Count(keras.callbacks.Callback):
        total = np.zeros(N)
        def on_train_batch_end(self, batch, logs=None):
            self.total += seen.seen.numpy()

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    with strategy.scope():
        inputs = keras.Input((2,))
        seen = Seen()
        model = keras.Model(inputs, keras.layers.Dense(1)(seen(inputs)))
        model.compile("sgd", "mse")
    x = np.stack([np.arange(N), np.ones(N)], axis=1).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, np.zeros(N, "float32"))).batch(8)
    count = Count()
    history = tfpipe.fit(model, data, epochs=2, callbacks=[count], verbose=0)
    assert (count.total == 2).all(), count.total
    report = history.report
    assert report.batch_size == 8
    # No model probe under several replicas: the input wait is not measured, nor shown as 0%.
    assert report.input_wait_fraction is None and report.verdict == "unknown", report
    assert "input wait       not measured" in str(report), report
    parts = report.breakdown.seconds()
    assert "input wait" not in parts and "compute" not in parts and "train steps" in parts
    print("OK", report.verdict)
    """
)


@pytest.mark.slow
def test_mirrored_strategy_uses_each_example_once_per_epoch(tmp_path: Path) -> None:
    run_fresh(MIRRORED, tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        # Resuming from a backup saved at the very end of training: no step runs.
        ({"epochs": 1, "initial_epoch": 1}, "no train step ran"),
        # One batch: the only execution is the first, whose time is mostly tracing.
        ({"epochs": 1}, "only the first execution ran"),
    ],
)
def test_a_run_without_timed_steps_claims_no_verdict(kwargs: dict[str, Any], why: str) -> None:
    history = tfpipe.fit(tiny_cnn(), arrays_dataset(count=8), verbose=0, **kwargs)
    report = history.report
    assert report.verdict == "unknown", why
    assert report.achieved_examples_per_s is None and report.input_wait_fraction is None
    assert "no train step was timed" in report.advice[0]
    text = str(report)
    assert "nan" not in text and "verdict: unknown" in text
    assert "achieved in fit  not measured" in text


def test_report_without_an_achieved_rate_under_replicas_claims_no_verdict() -> None:
    # Several replicas: the model alone is not timed either; the advice must not divide by
    # an achieved rate that does not exist.
    report = FitReport.build(
        input_alone=Throughput(900.0, 28.1, 0.4, 50, 1600),
        model_examples_per_s=None,
        achieved_examples_per_s=None,
        input_kind="Pipeline",
        batch_size=32,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
    )
    assert (report.verdict, report.input_wait_fraction) == ("unknown", None)
    assert report.advice[0].startswith("no train step was timed") and "nan" not in str(report)


def test_y_alone_takes_the_one_image_as_x() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (12, *SIZE, 3), dtype=np.uint8)
    tags = rng.integers(0, 2, (12, NUM_CLASSES)).astype(np.float32)  # multi-hot
    source = tfpipe.from_arrays({"image": images, "tags": tags, "id": np.arange(12.0)})
    model = keras.Sequential(
        [keras.Input((*SIZE, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)]
    )
    model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
    history = tfpipe.fit(model, source, y="tags", batch_size=4, report=False, verbose=0)
    assert len(history.history["loss"]) == 1
    two_images = tfpipe.from_arrays({"image": images, "other": images, "tags": tags})
    with pytest.raises(SchemaError, match=r"y='tags' alone takes the one Image .* has 2"):
        tfpipe.fit(model, two_images, y="tags", verbose=0)
    pipeline = tfpipe.Pipeline(source).batch(4)  # no schema-wide default: x is needed
    with pytest.raises(ValueError, match=r"pass x=\.\.\."):
        tfpipe.fit(model, pipeline, y="tags", verbose=0)
