"""The model alone: train steps on one batch held in memory, timed, with every variable
restored afterwards; where `tfpipe.fit` chooses `steps_per_execution`.

    batch ──repeat in memory──▶ model.fit(..., StepTimer(stop_after=PROBE_SECONDS)) ──▶ Probe
                                 └─ steps short, epoch sized: try a larger steps_per_execution
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tfpipe.errors import SchemaError
from tfpipe.training.backend import ONE_STEP_NOTE, one_step_per_execution, strategy_of
from tfpipe.training.keras_internals import profiles_a_batch, release_epoch_iterator
from tfpipe.training.throughput import batch_size_of
from tfpipe.training.timing import StepClock

PROBE_SECONDS = 1.0
SHORT_STEP_S = 0.02
TARGET_EXECUTION_S = 0.05
MAX_STEPS_PER_EXECUTION = 64
MIN_GAIN = 0.1
_PROBE_STEPS_LIMIT = 100_000
UNKNOWN_LENGTH_NOTE = (
    "steps_per_execution stays 1 although steps are short: the length of an epoch is unknown "
    "(no metadata gives the number of examples), and several steps per execution could run "
    "past its end; give the input a known length (TFRecords with their metadata, or a "
    "repeated input with steps_per_epoch) to let tfpipe.fit choose a larger value"
)
REPLICATED_NOTE = (
    "the model alone was not timed before training: under a multi-replica strategy (with "
    "several workers, a probe stopped after a set time would stop each at a different step, "
    "leaving the others waiting at an all-reduce), so the input wait is not measured"
)

_TRAIN_BATCH_HOOKS = (
    "on_batch_begin",
    "on_batch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
)
_TEST_BATCH_HOOKS = ("on_test_batch_begin", "on_test_batch_end")
# Keras callbacks whose batch hooks act only every `save_freq` / `update_freq` batches.
_STEP_FREQUENCY_CALLBACKS = (
    keras.callbacks.ModelCheckpoint,
    keras.callbacks.BackupAndRestore,
    keras.callbacks.TensorBoard,
)


def batch_level_callbacks(
    callbacks: Sequence[keras.callbacks.Callback], validating: bool
) -> list[str]:
    """The callbacks that act on single batches, described: those overriding a batch hook
    (`on_train_batch_end`, ...; the test ones when `validating`), and ModelCheckpoint,
    BackupAndRestore or TensorBoard with an integer step frequency or a profiled batch. Keras
    calls batch hooks once per execution, so more steps per execution would call them less.

    Examples:
        >>> batch_level_callbacks([keras.callbacks.ModelCheckpoint("m.keras", save_freq=5),
        ...                        keras.callbacks.EarlyStopping()], validating=False)
        ['ModelCheckpoint(save_freq=5)']
    """
    hooks = _TRAIN_BATCH_HOOKS + (_TEST_BATCH_HOOKS if validating else ())
    found = []
    for callback in callbacks:
        name = type(callback).__name__
        if isinstance(callback, _STEP_FREQUENCY_CALLBACKS):
            frequency = _step_frequency(callback)
            if frequency is not None:
                found.append(f"{name}({frequency})")
            continue
        overridden = [hook for hook in hooks if _overrides(callback, hook)]
        if overridden:
            found.append(f"{name} ({', '.join(overridden)})")
    return found


def _overrides(callback: keras.callbacks.Callback, hook: str) -> bool:
    # A LambdaCallback sets its hooks on the instance.
    own = getattr(type(callback), hook) is not getattr(keras.callbacks.Callback, hook)
    return own or hook in vars(callback)


def _step_frequency(callback: keras.callbacks.Callback) -> str | None:
    for attribute in ("save_freq", "update_freq"):  # TensorBoard stores "batch" as 1
        value = getattr(callback, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{attribute}={value}"
    if profiles_a_batch(callback):  # TensorBoard(profile_batch=...)
        return "profile_batch"
    return None


def batch_callbacks_note(found: Sequence[str]) -> str:
    """The report's note on why `steps_per_execution` stayed 1 for batch-level callbacks."""
    return (
        f"steps_per_execution stays 1 although steps are short: {', '.join(found)} "
        "act(s) on single batches, and with several steps per execution Keras calls batch "
        "hooks once per execution (fewer saves, logs or calls than batches); make them act "
        "per epoch (e.g. save_freq='epoch') to let tfpipe.fit choose a larger value, or "
        "compile the model with the steps_per_execution you want"
    )


class StepTimer(StepClock):
    """Times train steps; only the first execution of the run (tracing, start-up) is left out.

    The first execution of each later epoch counts the time from the previous epoch's last
    step until validation or the epoch-end callbacks start, and from `on_epoch_begin` on: an
    input that restarts at every epoch is measured, validation and callbacks are not.
    With `stop_after` seconds of timed steps it stops training (used by the model probe).
    """

    def __init__(self, stop_after: float | None = None) -> None:
        super().__init__()
        self.stop_after = stop_after
        self.seconds = 0.0
        self._last: float | None = None
        self._paused_at: float | None = None
        self._resumed_at = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self._resumed_at = time.perf_counter()

    def _pause(self) -> None:
        if self._last is not None and self._paused_at is None:
            self._paused_at = time.perf_counter()

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._pause()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._pause()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.perf_counter()
        if self._last is None:
            seconds = now - self._resumed_at
        elif self._paused_at is None:
            seconds = now - self._last
        else:  # the first execution of a later epoch, without the pause between epochs
            seconds = (self._paused_at - self._last) + (now - self._resumed_at)
        if self.count(batch, seconds) is not None:
            self.seconds += seconds
        self._last, self._paused_at = now, None
        if self.stop_after is not None and self.seconds >= self.stop_after:
            self.model.stop_training = True

    @property
    def step_seconds(self) -> float:
        """Mean seconds per step; the first execution counts only when nothing else was timed."""
        if self.timed_steps:
            return self.seconds / self.timed_steps
        return self.first_seconds / max(self.first_steps, 1)


@dataclasses.dataclass(frozen=True)
class Probe:
    """The model alone: seconds per step at `steps_per_execution`, and who chose that value."""

    step_seconds: float
    steps_per_execution: int
    chosen: bool
    notes: tuple[str, ...] = ()


def set_steps_per_execution(model: keras.Model, value: int) -> None:
    model.steps_per_execution = value
    model.train_function = model.test_function = model.predict_function = None


def model_state(model: keras.Model) -> list[Any]:
    optimizer = model.optimizer.variables if model.optimizer is not None else []
    return [*model.variables, *optimizer, *model.metrics_variables]


def _time_steps(model: keras.Model, memory: tf.data.Dataset) -> float:
    timer = StepTimer(stop_after=PROBE_SECONDS)
    model.fit(
        memory,
        steps_per_epoch=_PROBE_STEPS_LIMIT,
        verbose=0,
        callbacks=[timer],
        shuffle=False,
    )
    release_epoch_iterator()  # the timer stopped fit: its input would outlive the probe
    return timer.step_seconds


def probe_model(
    model: keras.Model,
    batch: Any,
    steps: int | None,
    *,
    tune: bool = True,
    batch_callbacks: Sequence[str] = (),
) -> Probe:
    """Times train steps on `batch` held in memory, restoring every variable afterwards.

    Also the first check that the batches fit the model, and where `steps_per_execution` is
    chosen (left alone when the model was compiled with a value other than 1): a divisor of
    at most half the `steps` of an epoch, so that every epoch has a step timed after its first
    one and no epoch runs past its end. When the length of an epoch is unknown (`steps` is
    None) it stays 1, with a note saying so: any larger value could run past the end; so it
    does with `batch_callbacks` (`batch_level_callbacks`' descriptions), which would be called
    once per execution, and on Keras's PyTorch backend, which runs one step per call. With
    `tune=False` (backups are saved between steps) it is only timed.
    """
    examples = batch_size_of(batch)
    # unbatch + batch keeps the batch dimension unknown, as in `data`: fit reuses the trace.
    memory = tf.data.Dataset.from_tensors(batch).repeat().unbatch().batch(examples)
    try:
        x, _, _ = keras.utils.unpack_x_y_sample_weight(batch)
        if not model.built:
            model(x)
        if model.optimizer is not None and not model.optimizer.built:
            with strategy_of(model).scope():
                model.optimizer.build(model.trainable_variables)
        variables = model_state(model)
        saved = [v.numpy() for v in variables]
        step_seconds = _time_steps(model, memory)
    except (ValueError, TypeError, tf.errors.OpError) as e:
        raise SchemaError(
            f"data yields batches of {describe_structure(batch)}, which do not fit the model "
            f"(inputs {describe_structure(model.inputs) if model.built else 'unknown'}): {e}. "
            "Yield (x, y) batches whose x matches the model's inputs, e.g. with "
            "tfpipe.Pipeline(...).as_supervised('image', 'label')"
        ) from e
    try:
        used = model.steps_per_execution
        candidate = min(MAX_STEPS_PER_EXECUTION, math.ceil(TARGET_EXECUTION_S / step_seconds))
        if steps:  # a divisor of the epoch: Keras runs whole executions, past steps_per_epoch
            limit = max(1, min(candidate, steps // 2))
            candidate = max(d for d in range(1, limit + 1) if steps % d == 0)
        # Keras 3.15's multi-step loop fails under a multi-replica strategy: tune only without.
        replicas = strategy_of(model).num_replicas_in_sync
        if not tune or used != 1 or step_seconds >= SHORT_STEP_S or candidate < 2 or replicas > 1:
            return Probe(step_seconds, used, False)
        if one_step_per_execution():
            return Probe(step_seconds, used, False, (ONE_STEP_NOTE,))
        if steps is None:
            return Probe(step_seconds, used, False, (UNKNOWN_LENGTH_NOTE,))
        if batch_callbacks:
            return Probe(step_seconds, used, False, (batch_callbacks_note(batch_callbacks),))
        functions = (model.train_function, model.test_function, model.predict_function)
        set_steps_per_execution(model, candidate)
        faster = _time_steps(model, memory)
        if faster <= (1 - MIN_GAIN) * step_seconds:
            return Probe(faster, candidate, True)
        model.steps_per_execution = 1
        model.train_function, model.test_function, model.predict_function = functions
        return Probe(step_seconds, 1, False)
    finally:
        for variable, value in zip(variables, saved, strict=True):
            variable.assign(value)


def describe_structure(structure: Any) -> str:
    """Shapes and dtypes of a nested structure of arrays, tensors or Keras tensors."""
    return str(
        tf.nest.map_structure(
            lambda t: f"{getattr(t.dtype, 'name', t.dtype)}{list(t.shape)}",
            structure,
        )
    )
