"""The report's breakdown: every second of training by cause, with advice and the input stages.

Timings on a loaded machine vary, so the tests assert structure, ordering and lower bounds
(a 50 ms sleep takes at least 50 ms), never exact seconds.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.training.breakdown import Breakdown, InputStages
from tfpipe.training.map_costs import input_stages
from tfpipe.training.report import FitReport
from tfpipe.training.throughput import Throughput
from tfpipe.training.timing import INPUT_WAIT, Clock, HookCalls, Timings

breakdown_module = importlib.import_module("tfpipe.training.breakdown")

SIZE = (16, 16)
NUM_CLASSES = 3
SLEEP_S = 0.05
# A batch's input time: well over a step of the tiny model even when a busy machine makes
# that step several times slower (0.05 s failed once at load ~10: 0.55 s of wait, 0.57 s of
# compute over 24 steps).
INPUT_SLEEP_S = 0.15


pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


def tiny_model() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(NUM_CLASSES),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def arrays(count: int = 48, batch: int = 8) -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((count, *SIZE, 3), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, count)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def check_sums(breakdown: Breakdown) -> None:
    """The parts and the unexplained rest make the wall time; the named parts 95% of it."""
    parts = [part.seconds for part in breakdown]
    assert sum(breakdown.seconds().values()) == pytest.approx(breakdown.wall_s, rel=1e-6)
    assert sum(parts) >= 0.95 * breakdown.wall_s
    assert breakdown.unexplained_s <= 0.05 * breakdown.wall_s
    assert parts == sorted(parts, reverse=True)
    for part in breakdown:
        assert part.share == pytest.approx(part.seconds / breakdown.wall_s)


class Sleepy(keras.callbacks.Callback):
    """Sleeps 50 ms at the end of every train execution."""

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        time.sleep(SLEEP_S)


def test_a_sleeping_callback_is_named_with_its_share(capsys: pytest.CaptureFixture[str]) -> None:
    history = tfpipe.fit(tiny_model(), arrays(), epochs=2, callbacks=[Sleepy()], verbose=0)
    breakdown = history.report.breakdown
    check_sums(breakdown)
    sleepy = breakdown["Sleepy"]
    calls = sleepy.detail.split()[0]
    assert sleepy.callback and "calls of on_train_batch_end" in sleepy.detail
    assert int(calls) * SLEEP_S <= sleepy.seconds < 2 * int(calls) * SLEEP_S + 0.2
    assert sleepy.seconds > breakdown["host overhead"].seconds
    assert not breakdown["compute"].callback
    assert {"start-up", "compute", "host overhead", "epoch restarts"} <= set(breakdown.seconds())
    line = next(a for a in history.report.advice if a.startswith("the callback Sleepy"))
    assert f"took {sleepy.share:.0%} of the run" in line
    printed = capsys.readouterr().out
    assert f"where the {breakdown.wall_s:.2f} s of training went" in printed
    assert "Sleepy" in printed and "unexplained" in printed


class SlowBatches(keras.utils.PyDataset):
    """12 batches of 8 rows of 4 features, each taking at least INPUT_SLEEP_S to make."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        time.sleep(INPUT_SLEEP_S)
        return np.full((8, 4), index, np.float32), np.arange(8) % NUM_CLASSES


def test_a_slow_input_is_booked_as_input_wait_and_found_input_bound() -> None:
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(NUM_CLASSES)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = tfpipe.fit(model, SlowBatches(), epochs=2, verbose=0)
    report, breakdown = history.report, history.report.breakdown
    check_sums(breakdown)
    assert report.verdict == "input-bound" and report.input_wait_fraction > 0.5, report
    # Every step after each epoch's first waited for a batch that took INPUT_SLEEP_S to make
    # (less the little time between steps in which the next one was being made).
    waited = breakdown[INPUT_WAIT].seconds
    assert waited >= 0.5 * (2 * 12 - 2) * INPUT_SLEEP_S, breakdown.lines()
    assert waited > 3 * (breakdown["compute"].seconds + breakdown["host overhead"].seconds)


def test_a_checkpoint_every_step_is_named_with_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(breakdown_module, "ADVICE_SHARE", 0.0)  # the threshold is not tested
    checkpoint = keras.callbacks.ModelCheckpoint(
        tmp_path / "model.weights.h5", save_weights_only=True, save_freq=1
    )
    history = tfpipe.fit(tiny_model(), arrays(), epochs=1, callbacks=[checkpoint], verbose=0)
    assert (tmp_path / "model.weights.h5").is_file()  # the timed callback still saves
    breakdown = history.report.breakdown
    check_sums(breakdown)
    part = breakdown["ModelCheckpoint"]
    assert part.callback and part.seconds > 0
    saves = int(part.detail.split()[1])  # "about N saves"
    assert 1 <= saves <= 6
    line = next(a for a in history.report.advice if a.startswith("ModelCheckpoint"))
    assert f"saved about {saves} times (save_freq=1)" in line
    assert f"took {part.share:.0%} of the run" in line and "save_freq='epoch'" in line


class SlowValidation(keras.utils.PyDataset):
    """2 batches of 8, each taking 0.1 s to load."""

    def __init__(self) -> None:
        super().__init__()
        self.x = np.zeros((16, *SIZE, 3), np.float32)
        self.y = np.zeros(16, np.int64)

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        time.sleep(0.1)
        return self.x[index * 8 : (index + 1) * 8], self.y[index * 8 : (index + 1) * 8]


def heavy_flip(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """A random augmentation done expensively: upsized 24x, adjusted, downsized."""
    image = tf.image.resize(example["image"], (384, 384))
    for _ in range(6):
        image = tf.image.random_brightness(tf.image.random_flip_left_right(image), 0.1)
    return {**example, "image": tf.image.resize(image, SIZE)}


@pytest.fixture(scope="module")
def records(image_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    prefix = str(tmp_path_factory.mktemp("records") / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(image_folder), prefix, progress=False)
    return prefix


@pytest.mark.slow
def test_slow_validation_counts_as_validation_and_a_random_map_as_the_costly_stage(
    records: str,
) -> None:
    pipeline = (
        tfpipe.Pipeline(records, image_size=SIZE, rescale=1 / 255)
        .map(heavy_flip)
        .batch(8)
        .as_supervised("image", "label")
    )
    history = tfpipe.fit(tiny_model(), pipeline, validation=SlowValidation(), epochs=2, verbose=0)
    breakdown = history.report.breakdown
    check_sums(breakdown)
    validation = breakdown["validation"]
    assert validation.seconds >= 2 * 2 * 0.1  # 2 evaluations of 2 batches of 0.1 s
    assert validation.detail.startswith("2 evaluation(s)")
    # The parts share out the wall time, so the 0.4 s of validation input are in no other.
    stages = breakdown.input_stages
    assert stages is not None and stages.maps == ("map(heavy_flip)",) and stages.random
    assert stages.costliest == "map(heavy_flip)" and stages.maps_share >= 0.5
    assert stages.cpu_ms_per_example > stages.cpu_ms_per_example_without_maps > 0
    line = next(a for a in history.report.advice if a.startswith("random augmentation"))
    assert f"Pipeline.map(heavy_flip) is {stages.maps_share:.0%} of the input's CPU" in line
    assert "Keras preprocessing layers" in line
    assert "costliest: map(heavy_flip)" in str(history.report)


def test_input_stages_need_maps_and_say_when_one_is_random(records: str) -> None:
    alone = Throughput(800.0, 100.0, 0.0, 10, 80, cpu_s=0.2)  # 2.5 ms of CPU per example
    plain = tfpipe.Pipeline(records, image_size=SIZE).batch(8)
    assert input_stages(plain, alone, 0.1) is None
    assert input_stages(plain.map(heavy_flip).cache(), alone, 0.1) is None  # a cache decides
    stages = input_stages(plain.map(lambda ex: {**ex, "label": ex["label"] + 1}), alone, 0.1)
    assert stages is not None and not stages.random and stages.maps == ("map(<lambda>)",)
    assert stages.cpu_ms_per_example == pytest.approx(2.5)
    assert stages.cpu_ms_per_example_without_maps > 0
    # A filter that needs what a map makes: the maps cannot be left out.
    tagged = plain.map(lambda ex: {**ex, "keep": ex["label"] >= 0}).filter(lambda ex: ex["keep"])
    assert input_stages(tagged, alone, 0.1) is None


def timings(**seconds: float) -> Timings:
    return Timings(
        wall_s=10.0,
        seconds=seconds,
        hooks={"Chatty": {"on_train_batch_end": HookCalls(100, seconds.get("Chatty", 0.0))}},
        steps=100,
        timed_steps=99,
        executions=100,
        epochs=2,
        validations=2,
        callbacks={},
    )


@pytest.mark.parametrize(
    ("part", "advice"),
    [
        ("validation", "validation took 30% of the run (3.0 s), 1.5 s per evaluation: "),
        ("host overhead", "host overhead between steps took 30% of the run (3.0 s), 30.00 ms "),
        ("ProgbarLogger", "logging every step (Keras's progress bar) took 30% of the run"),
        ("epoch restarts", "epoch restarts took 30% of the run (3.0 s): the input starts "),
        ("start-up", "start-up (tracing the train step, the first batch) took 30%"),
        ("Chatty", "the callback Chatty took 30% of the run (3.0 s), in 100 calls of "),
    ],
)
def test_each_costly_part_gets_advice_with_its_figure(part: str, advice: str) -> None:
    breakdown = Breakdown.build(timings(compute=6.5, **{part: 3.0}))
    assert breakdown[part].share == pytest.approx(0.3)
    assert breakdown.unexplained_s == pytest.approx(0.5)
    assert [line for line in breakdown.advice if line.startswith(advice)]
    assert len(breakdown.advice) == 1  # compute is what training is for: no advice


def test_validation_advice_for_a_table_never_talks_of_images() -> None:
    measured = timings(compute=6.5, validation=3.0)
    (table,) = Breakdown.build(measured, data_kind="tensors").advice
    assert "cache its parsed examples" in table and "image" not in table
    (images,) = Breakdown.build(measured, data_kind="images").advice
    assert "cache its decoded images" in images


def test_restarts_of_an_input_kept_for_the_run_get_no_advice_to_keep_it() -> None:
    """tfpipe.fit repeats a finite input (one iterator for the run): what the epochs' starts
    cost then is Keras's work between epochs, and "keep one iterator" would be wrong."""
    measured = timings(compute=6.5, **{"epoch restarts": 3.0})
    kept = Breakdown.build(measured, input_kept=True)
    assert kept.advice == ()
    assert kept["epoch restarts"].detail.endswith("Keras's work between epochs, one input iterator")
    assert Breakdown.build(measured).advice[0].startswith("epoch restarts took 30% of the run")


def test_tensorboard_logging_every_step_is_advised_to_log_less(tmp_path: Path) -> None:
    board = keras.callbacks.TensorBoard(str(tmp_path), update_freq=1)
    measured = timings(compute=7.0, TensorBoard=2.0)
    breakdown = Breakdown.build(dataclasses.replace(measured, callbacks={"TensorBoard": board}))
    assert breakdown["TensorBoard"].callback
    assert breakdown.advice == (
        "TensorBoard logging every 1 step(s) took 20% of the run (2.0 s): log every 100 steps "
        "(update_freq=100) or once per epoch, and write histograms less often (histogram_freq)",
    )


def test_cheap_parts_get_no_advice_and_a_missing_part_is_named() -> None:
    breakdown = Breakdown.build(timings(compute=9.0, validation=0.3))
    assert breakdown.advice == ()
    with pytest.raises(KeyError, match=r"no part 'TensorBoard'.*'compute', 'validation'"):
        breakdown["TensorBoard"]


def test_costly_maps_get_advice_cheap_ones_none() -> None:
    costly = InputStages(("map(flip)",), True, 2.0, 0.5)
    deterministic = InputStages(("map(tokenize)",), False, 2.0, 0.5)
    cheap = InputStages(("map(flip)",), True, 1.0, 0.9)
    assert costly.maps_share == pytest.approx(0.75) and costly.costliest == "map(flip)"
    assert cheap.costliest == "reading, parsing and decoding"
    advice = {
        stages: Breakdown.build(timings(compute=10.0), input_stages=stages).advice
        for stages in (costly, deterministic, cheap)
    }
    assert advice[costly][0].startswith("random augmentation in Pipeline.map(flip) is 75%")
    assert "not random: cache() after it" in advice[deterministic][0]
    assert advice[cheap] == ()


def test_the_plot_draws_the_breakdown(tmp_path: Path) -> None:
    report = FitReport.build(
        input_alone=Throughput(600.0, 18.75, 0.1, 20, 640),
        model_examples_per_s=10_000.0,
        achieved_examples_per_s=550.0,
        input_kind="PyDataset",
        batch_size=32,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
        breakdown=Breakdown.build(timings(compute=6.0, validation=3.0)),
    )
    assert report.advice[-1].startswith("validation took 30%")
    text = report.plot(tmp_path / "report.svg").read_text()
    for label in ("compute 60%", "validation 30%", "unexplained 10%"):
        assert label in text


def test_only_the_hooks_a_callback_implements_are_timed_and_all_still_run() -> None:
    from tfpipe.training.timing import Clock

    seen: list[str] = []
    lambdas = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append("L"))
    clock = Clock(0.001)
    callbacks = clock.around([lambdas, Sleepy()], verbose=0)
    hooks = keras.callbacks.CallbackList(callbacks, epochs=1, steps=2)
    clock.start()
    hooks.on_train_begin()
    hooks.on_epoch_begin(0)
    for step in range(2):
        hooks.on_train_batch_begin(step)
        hooks.on_train_batch_end(step, {"loss": 0.5})
    hooks.on_epoch_end(0, {"loss": 0.5})
    hooks.on_train_end()
    timings = clock.stop()
    assert seen == ["L"]
    assert set(timings.hooks["Sleepy"]) == {"on_train_batch_end"}
    assert timings.hooks["Sleepy"]["on_train_batch_end"].calls == 2
    assert timings.seconds["Sleepy"] >= 2 * SLEEP_S
    assert timings.hooks["LambdaCallback"]["on_epoch_end"].calls == 1
    assert (timings.steps, timings.timed_steps, timings.epochs) == (2, 1, 1)
    assert sum(timings.seconds.values()) == pytest.approx(timings.wall_s, rel=1e-3)


@pytest.mark.parametrize("compiles", [False, True])
def test_a_short_last_batch_compiled_again_is_start_up_not_input_wait(compiles: bool) -> None:
    """Under JAX the first epoch's short last batch compiles the step for its shape: with
    `short_last_compiles` that execution is start-up, else it would read as input wait."""
    clock = Clock(step_seconds=0.001, short_last_compiles=compiles)
    clock.set_params({"steps": 3, "epochs": 1})
    clock.start()
    clock.on_train_begin()
    clock.on_epoch_begin(0)
    for batch, seconds in enumerate([0.01, 0.01, 0.2]):
        clock.on_train_batch_begin(batch)
        time.sleep(seconds)
        clock.on_train_batch_end(batch)
    timings = clock.stop()
    if compiles:
        assert timings.seconds.get(INPUT_WAIT, 0.0) < 0.1 and timings.timed_steps == 1
    else:
        assert timings.seconds[INPUT_WAIT] > 0.15 and timings.timed_steps == 2
