"""Where the seconds of a training run go, told by Keras's own callback hooks.

Every second between `Clock.start()` and `Clock.stop()` is booked to exactly one part: a
`Ledger` keeps the part the time is currently running into, and each hook switches it.

    callbacks = [Clock (first), tfpipe's own, each user callback timed by class,
                 Keras's progress bar as a timed ProgbarLogger, _Mark (last)] + Keras's History

    Clock hook ─▶ "other callbacks" ─▶ each timed callback ─▶ ... ─▶ _Mark hook ─▶ the phase
    (the time since the last hook goes          (its own part,           that follows the
     to the phase it ended)                      by class name)           event (a step, ...)

A train step is the time from the mark's `on_train_batch_begin` to the clock's
`on_train_batch_end`: nothing but Keras's train function (input and compute). It is split into
input wait, as a `WaitMeter` measured it inside the step (the time its fetches of the next
batch were blocked), and compute (the rest); without a meter into compute (the model alone's
step time from the probe) and input wait (the rest, an estimate), or left whole as "train
steps" when the model alone was not timed; the first step of the run is start-up
(tracing, first batch), the first of each later epoch part of the epoch restarts. The time
between a step's last hook and the next step's first is host overhead; after the last hook
until `fit` returns, the end of training. Nothing here patches Keras: only public hooks are
used.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf

START_UP = "start-up"
COMPUTE = "compute"
INPUT_WAIT = "input wait"
STEPS_UNSPLIT = "train steps"  # compute and input wait, when the model alone was not timed
HOST = "host overhead"
VALIDATION = "validation"
RESTARTS = "epoch restarts"
OTHER_CALLBACKS = "other callbacks"
END = "end of training"
UNEXPLAINED = "unexplained"
PROGRESS_BAR = "ProgbarLogger"
BACKUP_SAVES = "backup saves"  # tfpipe.fit(backup_dir=...)
_STEP = "step"  # a train step in progress: split into the parts above when it ends

_HOOKS = (
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_test_begin",
    "on_test_end",
    "on_test_batch_begin",
    "on_test_batch_end",
)


class Ledger:
    """Books every second since `start()` to one part: the one `phase` names, until a hook
    switches it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.hooks: dict[str, dict[str, HookCalls]] = {}
        self.phase = START_UP
        self._since = 0.0

    def start(self) -> None:
        self._since = time.perf_counter()

    def take(self) -> float:
        """The seconds since the last booking, unbooked: the caller books them."""
        now = time.perf_counter()
        elapsed, self._since = now - self._since, now
        return elapsed

    def add(self, part: str, seconds: float) -> None:
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds

    def book(self, part: str) -> None:
        """Books the seconds since the last booking to `part`."""
        self.add(part, self.take())

    def spend(
        self, name: str, hook: str, call: Callable[..., None], *args: Any, **kwargs: Any
    ) -> None:
        """Calls `call` (a callback's `hook`), booking the time until now to the current
        phase and the time inside to `name`, the callback's class."""
        self.book(self.phase)
        try:
            call(*args, **kwargs)
        finally:
            seconds = self.take()
            self.add(name, seconds)
            calls = self.hooks.setdefault(name, {}).setdefault(hook, HookCalls())
            calls.calls += 1
            calls.seconds += seconds


@dataclasses.dataclass
class HookCalls:
    """How often a callback's hook was called, and the seconds it took in all."""

    calls: int = 0
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class Timings:
    """What a `Clock` measured: seconds per part, and what the parts were made of.

    Attributes:
        wall_s: seconds from `start()` to `stop()`.
        seconds: part -> seconds; the parts sum to `wall_s`.
        hooks: callback class name -> hook name -> its calls and seconds.
        steps: train steps.
        timed_steps: train steps after the first execution of the run (tracing, start-up).
        first_steps: train steps of the first execution of the run (and, under JAX, of the
            execution that compiled the first epoch's short last batch).
        first_seconds: the seconds of those executions.
        executions: train executions (calls of the train function, `steps_per_execution`
            steps each).
        epochs: epochs started.
        validations: evaluations run at the end of an epoch.
        callbacks: callback class name -> the callback instance (its settings, for advice).
        wait_measured: whether a `WaitMeter` measured the input wait (else it is the step
            time beyond the model alone's, an estimate).
    """

    wall_s: float
    seconds: dict[str, float]
    hooks: dict[str, dict[str, HookCalls]]
    steps: int
    timed_steps: int
    executions: int
    epochs: int
    validations: int
    callbacks: dict[str, keras.callbacks.Callback]
    first_steps: int = 0
    first_seconds: float = 0.0
    wait_measured: bool = False

    @property
    def measured_wait_fraction(self) -> float | None:
        """The share of the timed train steps' time blocked on the next batch, as the
        `WaitMeter` measured it; None without a meter or a timed step."""
        steps = self.seconds.get(COMPUTE, 0.0) + self.seconds.get(INPUT_WAIT, 0.0)
        if not self.wait_measured or steps <= 0:
            return None
        return self.seconds.get(INPUT_WAIT, 0.0) / steps

    @property
    def step_seconds(self) -> float | None:
        """Seconds per train step after the first execution of the run: the input and the
        model together, the restart of the input at each epoch included, callbacks, host
        overhead and validation not. None when no step was timed: none ran, or only the
        first execution, whose time is mostly tracing and says nothing of the steps."""
        if not self.timed_steps:
            return None
        parts = (COMPUTE, INPUT_WAIT, STEPS_UNSPLIT, RESTARTS)
        return sum(self.seconds.get(part, 0.0) for part in parts) / self.timed_steps


class WaitMeter:
    """Measures how long the consumer of a tf.data input is blocked on its next element.

    `wrap` zips a clock before the dataset: fetching an element first reads the time (a
    synchronous map in the consumer's own call), then blocks on the dataset until its element
    is ready, then adds the seconds since that reading to a variable, all inside the train
    step's fetch. An element that was ready in the prefetch buffer adds almost nothing.

    Examples:
        >>> meter = WaitMeter()
        >>> data = meter.wrap(tf.data.Dataset.range(3).map(slow).prefetch(1))
        >>> model.fit(data, ...)
        >>> meter.take()  # seconds blocked since the last take
        0.82
    """

    def __init__(self) -> None:
        with tf.device("/cpu:0"):
            self.seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False)
        self._taken = 0.0

    def wrap(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` with the time blocked on each element added up; it must be the last
        stage before the consumer (no prefetch may follow it)."""
        asked_at = tf.data.Dataset.from_tensors(tf.constant(0, tf.int8)).repeat()
        asked_at = asked_at.map(lambda _: tf.timestamp())

        def add_wait(asked: tf.Tensor, element: Any) -> Any:
            # A stateful op in a tf.data function runs without a control dependency.
            self.seconds.assign_add(tf.timestamp() - asked)
            return element

        timed = tf.data.Dataset.zip(asked_at, dataset).map(add_wait)
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False  # it would fetch ahead
        return timed.with_options(options)

    def take(self) -> float:
        """Seconds blocked since the last `take`."""
        total = float(self.seconds.numpy())
        waited, self._taken = total - self._taken, total
        return waited


class StepClock(keras.callbacks.Callback):
    """Counts train steps execution by execution, telling start-up apart: the one step
    counter of `Clock` (fit's report) and of the model probe's `StepTimer`.

    Keras calls the batch hooks once per execution of `steps_per_execution` steps. The first
    execution of the run (tracing, the first batch) and, with `short_last_compiles`, the one
    of the first epoch's short last batch (JAX compiles the step again for its shape) are
    start-up: `first_steps` and `first_seconds`; the steps of every other are `timed_steps`.
    A subclass measures the seconds of an execution and passes them to `count`.

    Args:
        short_last_compiles: the first epoch's short last batch compiles the step again for
            its shape (JAX): that execution counts as start-up. Defaults to False.
    """

    def __init__(self, short_last_compiles: bool = False) -> None:
        super().__init__()
        self.short_last_compiles = short_last_compiles
        self.steps = self.timed_steps = self.executions = self.epochs = 0
        self.first_steps, self.first_seconds = 0, 0.0
        self.started = False  # a train step ended in this run
        self._begin = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epochs += 1

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._begin = batch

    def count(self, batch: int, seconds: float) -> int | None:
        """Counts the execution that ended at Keras's `batch` after `seconds`: its steps
        when they are timed, None when it was start-up (booked in `first_*`)."""
        if self.params.get("steps"):  # Keras reports a short last execution as a full one
            batch = min(batch, self.params["steps"] - 1)
        steps = batch - self._begin + 1
        compiled = (  # the first short last batch: a new shape, compiled under JAX
            self.short_last_compiles
            and self.epochs == 1
            and batch == (self.params.get("steps") or 0) - 1
        )
        first = not self.started or compiled
        self.steps += steps
        self.executions += 1
        self.started = True
        if first:
            self.first_steps += steps
            self.first_seconds += seconds
            return None
        self.timed_steps += steps
        return steps


class Clock(StepClock):
    """The first callback of the run: books the time since the previous hook to its phase.

    Examples:
        >>> clock = Clock(step_seconds=0.004)
        >>> clock.start()
        >>> model.fit(data, callbacks=clock.around([*callbacks]), epochs=2)
        >>> clock.stop().seconds["compute"]
        1.93

    Args:
        step_seconds: seconds per train step of the model alone (its probe); None when not
            measured (every step then counts whole as "train steps": compute and input wait
            are not told apart).
        short_last_compiles: the first epoch's short last batch compiles the step again for
            its shape (JAX): that execution counts as start-up. Defaults to False.
        meter: the `WaitMeter` around the input: input wait is then the time it measured,
            compute the rest of each step. Defaults to None (input wait estimated from
            `step_seconds`).
    """

    def __init__(
        self,
        step_seconds: float | None,
        short_last_compiles: bool = False,
        meter: WaitMeter | None = None,
    ) -> None:
        super().__init__(short_last_compiles)
        self.ledger = Ledger()
        self.step_seconds = step_seconds or None
        self.meter = meter
        self.validations = 0
        self._epoch_started = False  # a train step ended in this epoch
        self._timed: dict[str, keras.callbacks.Callback] = {}
        self._wall = 0.0

    def around(
        self, callbacks: Sequence[keras.callbacks.Callback], verbose: Any = "auto"
    ) -> list[keras.callbacks.Callback]:
        """The callbacks to give `model.fit`: this clock, each of `callbacks` timed by its
        class name (History and ProgbarLogger, which Keras looks for by type, and tfpipe's
        own are left as they are: "other callbacks"; one of tfpipe's with a `report_name`,
        e.g. `BACKUP_SAVES`, is timed under it), Keras's progress bar timed when `verbose`
        shows one, and the closing mark."""
        timed: list[keras.callbacks.Callback] = [self]
        for callback in callbacks:
            own = type(callback).__module__.startswith("tfpipe.")
            name = getattr(callback, "report_name", None) if own else type(callback).__name__
            keep = isinstance(callback, keras.callbacks.History | keras.callbacks.ProgbarLogger)
            if keep or name is None:
                timed.append(callback)
            else:
                self._timed.setdefault(name, callback)
                timed.append(_Timed(callback, self.ledger, name))
        if verbose != 0 and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in timed):
            timed.append(_TimedProgbar(self.ledger))
        return [*timed, _Mark(self)]

    def start(self) -> None:
        self._wall = time.perf_counter()
        self.ledger.start()

    def stop(self) -> Timings:
        """Books the time since the last hook (the end of `fit`) and returns the timings."""
        self.ledger.book(self.ledger.phase if self.ledger.phase != _STEP else UNEXPLAINED)
        return Timings(
            wall_s=time.perf_counter() - self._wall,
            seconds=dict(self.ledger.seconds),
            hooks=dict(self.ledger.hooks),
            steps=self.steps,
            timed_steps=self.timed_steps,
            executions=self.executions,
            epochs=self.epochs,
            validations=self.validations,
            callbacks=dict(self._timed),
            first_steps=self.first_steps,
            first_seconds=self.first_seconds,
            wait_measured=self.meter is not None,
        )

    def _switch(self, part: str | None = None) -> None:
        """Books the time since the last hook to `part` (the current phase by default); the
        callbacks' hooks follow."""
        self.ledger.book(part or self.ledger.phase)
        self.ledger.phase = OTHER_CALLBACKS

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._switch(START_UP)  # model.fit's set-up (also a second fit of a resumed run)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self._epoch_started = False
        self._switch()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_train_batch_begin(batch, logs)
        self._switch()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        seconds = self.ledger.take()
        waited = None if self.meter is None else min(seconds, self.meter.take())
        steps = self.count(batch, seconds)
        if steps is None:
            self.ledger.add(START_UP, seconds)
        elif self.step_seconds is None and waited is None:
            self.ledger.add(STEPS_UNSPLIT if self._epoch_started else RESTARTS, seconds)
        else:
            if waited is not None:
                compute = seconds - waited
            else:
                compute = min(seconds, steps * self.step_seconds)  # type: ignore[operator]
            self.ledger.add(COMPUTE, compute)
            self.ledger.add(INPUT_WAIT if self._epoch_started else RESTARTS, seconds - compute)
        self._epoch_started = True
        self.ledger.phase = OTHER_CALLBACKS

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.validations += 1
        self._switch(VALIDATION)  # from the epoch's last step: building the evaluation

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        self._switch()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # From the epoch's last step, or from the evaluation: Keras's end-of-epoch work.
        self._switch(RESTARTS if self.ledger.phase == HOST else None)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        # After the last epoch Keras releases the validation input (`del` of its iterator,
        # which can stall on an autotuned tf.data iterator); else it has nothing to do.
        self._switch(VALIDATION if self.validations else UNEXPLAINED)


class _Mark(keras.callbacks.Callback):
    """The last of tfpipe's callbacks: the hooks are over, the time from here on belongs to
    the phase the event starts."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def _enter(self, phase: str) -> None:
        ledger = self.clock.ledger
        ledger.book(ledger.phase)
        ledger.phase = phase

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._enter(START_UP)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._enter(RESTARTS if self.clock.started else START_UP)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._enter(_STEP)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._enter(HOST)

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._enter(VALIDATION)

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        self._enter(VALIDATION)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._enter(RESTARTS)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        # Until fit returns: Keras releases the input's iterator (an autotuned tf.data one can
        # stall for a while), tfpipe restores the model's steps_per_execution.
        self._enter(END)


class _Timed(keras.callbacks.Callback):
    """A user's callback, each hook it implements timed under its class name (the others
    stay the base class's no-ops, which cost nothing to time)."""

    def __init__(self, inner: keras.callbacks.Callback, ledger: Ledger, name: str) -> None:
        super().__init__()
        self.inner = inner
        _time_hooks(self, inner, ledger, name)

    def set_model(self, model: keras.Model) -> None:
        super().set_model(model)
        self.inner.set_model(model)

    def set_params(self, params: dict[str, Any]) -> None:
        super().set_params(params)
        self.inner.set_params(params)


class _TimedProgbar(keras.callbacks.ProgbarLogger):
    """Keras's progress bar (verbose=1 or 2), its hooks timed as "ProgbarLogger"."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        _time_hooks(self, _Untimed(self), ledger, PROGRESS_BAR)


class _Untimed:
    """The ProgbarLogger methods of a `_TimedProgbar`, below its timed instance attributes."""

    def __init__(self, progbar: _TimedProgbar) -> None:
        self.progbar = progbar

    def __getattr__(self, hook: str) -> Any:
        return getattr(keras.callbacks.ProgbarLogger, hook).__get__(self.progbar)


_LEGACY = {"on_train_batch_begin": "on_batch_begin", "on_train_batch_end": "on_batch_end"}


def _time_hooks(timed: keras.callbacks.Callback, source: Any, ledger: Ledger, name: str) -> None:
    """Sets on `timed` each hook `source` implements (its own or through its legacy alias,
    `on_batch_end` for `on_train_batch_end`), calling it through `ledger.spend`."""
    base = keras.callbacks.Callback
    for hook in _HOOKS:
        names = (hook, _LEGACY[hook]) if hook in _LEGACY else (hook,)
        # A method of a subclass, or a function set on the instance (as LambdaCallback does).
        own = [getattr(getattr(source, n), "__func__", None) for n in names]
        if any(method is not getattr(base, n) for method, n in zip(own, names, strict=True)):
            setattr(timed, hook, functools.partial(ledger.spend, name, hook, getattr(source, hook)))
