"""`Breakdown`: every second of `model.fit` by cause, and advice per cause with its figure.

timing.Clock (Keras hooks) ──Timings──▶ Breakdown.build ──▶ parts (seconds, share), the
stages.input_stages (input CPU) ──────────────────────────▶ unexplained rest, and advice
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from tfpipe.training.backend import one_step_per_execution
from tfpipe.training.timing import (
    BACKUP_SAVES,
    COMPUTE,
    END,
    HOST,
    INPUT_WAIT,
    OTHER_CALLBACKS,
    PROGRESS_BAR,
    RESTARTS,
    START_UP,
    STEPS_UNSPLIT,
    UNEXPLAINED,
    VALIDATION,
    HookCalls,
    Timings,
)

ADVICE_SHARE = 0.05
"""A part gets advice when it takes at least this share of the run."""
START_UP_SHARE = 0.25
MAPS_SHARE = 0.25
"""User maps get advice when they take at least this share of the input's CPU time."""
_PHASES = (START_UP, COMPUTE, INPUT_WAIT, STEPS_UNSPLIT, HOST, VALIDATION, RESTARTS, END)


@dataclasses.dataclass(frozen=True)
class BreakdownPart:
    """One cause of training time.

    Attributes:
        name: "start-up", "compute", "input wait" ("train steps" in place of both when the
            model alone was not timed, under a multi-replica strategy: input wait not
            measured), "host overhead", "validation", "epoch restarts", "end of training",
            "backup saves" (`backup_dir`), a callback's class name ("ModelCheckpoint",
            "ProgbarLogger" for Keras's progress bar, ...), or "other callbacks" (tfpipe's
            own and the History and ProgbarLogger instances given to `callbacks`).
        seconds: the seconds it took.
        share: its share of the wall time of training.
        callback: True for a callback's part.
        detail: what it was made of, e.g. "120 steps of 4.1 ms".
    """

    name: str
    seconds: float
    share: float
    callback: bool = False
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class InputStages:
    """The input's CPU time per example with and without its `Pipeline.map()`s.

    Attributes:
        maps: the maps, e.g. `("map(augment)",)`.
        random: whether a map is random (an augmentation).
        cpu_ms_per_example: CPU milliseconds per example of the whole input.
        cpu_ms_per_example_without_maps: the same without the maps: reading, parsing and
            decoding.
    """

    maps: tuple[str, ...]
    random: bool
    cpu_ms_per_example: float
    cpu_ms_per_example_without_maps: float

    @property
    def maps_share(self) -> float:
        """The maps' share of the input's CPU time, in [0, 1]."""
        if self.cpu_ms_per_example <= 0:
            return 0.0
        rest = self.cpu_ms_per_example_without_maps / self.cpu_ms_per_example
        return min(1.0, max(0.0, 1.0 - rest))

    @property
    def costliest(self) -> str:
        """The stage that costs the input most CPU time."""
        maps = ", ".join(self.maps)
        return maps if self.maps_share >= 0.5 else "reading, parsing and decoding"

    def line(self) -> str:
        maps = self.cpu_ms_per_example - self.cpu_ms_per_example_without_maps
        return (
            f"input CPU per example: {self.cpu_ms_per_example_without_maps:.2f} ms reading, "
            f"parsing and decoding, {max(0.0, maps):.2f} ms in {', '.join(self.maps)} "
            f"({self.maps_share:.0%}); costliest: {self.costliest}"
        )


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Where the wall time of training (`model.fit` inside `tfpipe.fit`) went, with advice.

    Examples:
        >>> history = tfpipe.fit(model, "out/train", epochs=2, callbacks=[checkpoint])
        >>> history.report.breakdown.seconds()
        {'compute': 6.1, 'ModelCheckpoint': 3.2, 'input wait': 1.0, ...}
        >>> history.report.breakdown["ModelCheckpoint"].share
        0.26

    Attributes:
        wall_s: the measured wall time of training, from just before `model.fit` to its
            return (tfpipe's probes of the model and the input alone are not part of it).
        parts: every cause with its seconds and share, largest first.
        unexplained_s: `wall_s` less the parts: time between two hooks that no part
            explains (e.g. the end of a `fit` that failed mid-step).
        input_stages: the input's CPU time with and without its `Pipeline.map()`s; None
            when the input has no maps (or is not a `Pipeline`) or they cannot be timed apart.
        advice: one line per costly cause, with its measured figure.
    """

    wall_s: float
    parts: tuple[BreakdownPart, ...]
    unexplained_s: float
    input_stages: InputStages | None = None
    advice: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        timings: Timings,
        *,
        steps_per_execution: int = 1,
        input_stages: InputStages | None = None,
        input_kept: bool = False,
        data_kind: str | None = None,
    ) -> Breakdown:
        """The parts of `timings`, largest first, and the advice for the costly ones
        (`input_kept`: the input was repeated, one iterator for the run, so epoch restarts are
        Keras's own work between epochs, not the input's; `data_kind`: "tensors" for data
        without images, whose advice never speaks of decoding images)."""
        wall = max(timings.wall_s, 1e-9)
        named = {n: s for n, s in timings.seconds.items() if n != UNEXPLAINED and s > 0}
        parts = tuple(
            sorted(
                (
                    BreakdownPart(
                        name=name,
                        seconds=seconds,
                        share=seconds / wall,
                        callback=name not in _PHASES,
                        detail=_detail(name, seconds, timings, input_kept),
                    )
                    for name, seconds in named.items()
                ),
                key=lambda part: -part.seconds,
            )
        )
        unexplained = max(0.0, timings.wall_s - sum(named.values()))
        advice = [
            line
            for part in parts
            if part.share >= ADVICE_SHARE
            for line in [
                _advice(
                    part=part,
                    timings=timings,
                    steps_per_execution=steps_per_execution,
                    input_kept=input_kept,
                    data_kind=data_kind,
                )
            ]
            if line
        ]
        if input_stages is not None and input_stages.maps_share >= MAPS_SHARE:
            advice.append(_maps_advice(input_stages))
        return cls(
            wall_s=timings.wall_s,
            parts=parts,
            unexplained_s=unexplained,
            input_stages=input_stages,
            advice=tuple(advice),
        )

    def __getitem__(self, name: str) -> BreakdownPart:
        for part in self.parts:
            if part.name == name:
                return part
        raise KeyError(
            f"no part {name!r} in the breakdown; its parts are {[p.name for p in self.parts]}"
        )

    def __iter__(self) -> Iterator[BreakdownPart]:
        return iter(self.parts)

    def seconds(self) -> dict[str, float]:
        """Part name -> seconds (with "unexplained"), e.g. to log them."""
        return {**{p.name: p.seconds for p in self.parts}, UNEXPLAINED: self.unexplained_s}

    def shares(self) -> dict[str, float]:
        """Part name -> share of the wall time (with "unexplained")."""
        wall = max(self.wall_s, 1e-9)
        return {name: seconds / wall for name, seconds in self.seconds().items()}

    def lines(self) -> list[str]:
        """The table `tfpipe.fit` prints: one row per part, then the unexplained rest."""
        width = max([len(UNEXPLAINED), *(len(p.name) for p in self.parts)])
        rows = [
            f"  {p.name:<{width}}  {p.seconds:>8.2f} s  {p.share:>4.0%}"
            + (f"  {p.detail}" if p.detail else "")
            for p in self.parts
        ]
        share = self.unexplained_s / max(self.wall_s, 1e-9)
        rows.append(f"  {UNEXPLAINED:<{width}}  {self.unexplained_s:>8.2f} s  {share:>4.0%}")
        if self.input_stages is not None:
            rows.append(f"  {self.input_stages.line()}")
        return [f"where the {self.wall_s:.2f} s of training went", *rows]


def _detail(name: str, seconds: float, timings: Timings, input_kept: bool) -> str:
    """What a part was made of."""
    steps, executions = timings.steps, max(timings.executions, 1)
    if name == START_UP:
        return "tracing, the first batch"
    if name == COMPUTE:
        if timings.wait_measured:
            return f"{steps} steps, less their wait for input"
        return f"{steps} steps of the model alone"
    if name == INPUT_WAIT:
        how = "blocked on the next batch" if timings.wait_measured else "beyond the model alone"
        return f"{1000 * seconds / max(steps, 1):.1f} ms per step {how}"
    if name == STEPS_UNSPLIT:
        return "compute and input wait together: input wait not measured (no model probe)"
    if name == HOST:
        return f"{1000 * seconds / executions:.2f} ms between executions of the train step"
    if name == VALIDATION:
        return f"{timings.validations} evaluation(s), its own input and compute"
    if name == RESTARTS:
        started = f"{max(timings.epochs - 1, 0)} later epoch(s) started, beyond compute"
        kept = ": Keras's work between epochs, one input iterator" if input_kept else ""
        return started + kept
    if name == END:
        return "after the last hook: releasing the input's iterator"
    if name == OTHER_CALLBACKS:
        return "tfpipe's own, History, a given ProgbarLogger"
    saves = _saves(name, timings)
    if saves is not None:
        return f"about {saves} saves"
    if name == BACKUP_SAVES:
        saved = _backups(timings)
        return f"{saved} saves, {1000 * seconds / max(saved, 1):.0f} ms each"
    return _costliest_hook(name, timings)


def _costliest_hook(name: str, timings: Timings) -> str:
    """E.g. "40 calls of on_train_batch_end, 51.2 ms each": where a callback spent most."""
    hooks = timings.hooks.get(name, {})
    if not hooks:
        return ""
    hook, done = max(hooks.items(), key=lambda item: item[1].seconds)
    return f"{done.calls} calls of {hook}, {1000 * done.seconds / max(done.calls, 1):.1f} ms each"


def _saves(name: str, timings: Timings) -> int | None:
    """How many times a ModelCheckpoint saved (at most), from its `save_freq`."""
    callback = timings.callbacks.get(name)
    freq = getattr(callback, "save_freq", None)
    if name != "ModelCheckpoint" or freq is None:
        return None
    if freq == "epoch":
        return timings.epochs
    batch_ends = timings.hooks.get(name, {}).get("on_train_batch_end", HookCalls()).calls
    return min(timings.steps // max(int(freq), 1), batch_ends)  # at most once per execution


def _backups(timings: Timings) -> int:
    """How many backups `tfpipe.fit(backup_dir=...)` saved."""
    return int(getattr(timings.callbacks.get(BACKUP_SAVES), "saves", 0))


def _advice(
    part: BreakdownPart,
    timings: Timings,
    steps_per_execution: int,
    input_kept: bool,
    *,
    data_kind: str | None = None,
) -> str | None:
    """What to do about a part that took at least `ADVICE_SHARE` of the run."""
    took = f"took {part.share:.0%} of the run ({part.seconds:.1f} s)"
    callback = timings.callbacks.get(part.name)
    if part.name == "ModelCheckpoint":
        freq = getattr(callback, "save_freq", "epoch")
        if freq == "epoch":
            return (
                f"ModelCheckpoint saved at each of {timings.epochs} epochs and {took}: save "
                "every few epochs, only the best (save_best_only=True), or the weights only "
                "(save_weights_only=True)"
            )
        return (
            f"ModelCheckpoint saved about {_saves(part.name, timings)} times (save_freq={freq}) "
            f"and {took}: save once per epoch (save_freq='epoch') or every 500 steps "
            "(save_freq=500)"
        )
    if part.name == BACKUP_SAVES:
        every = getattr(timings.callbacks.get(BACKUP_SAVES), "save_every", None)
        return (
            f"backup saves (backup_dir, {_backups(timings)} saves every {every} batches) "
            f"{took}: save less often (a larger save_every); a kill then repeats more batches"
        )
    if part.name == "TensorBoard":
        freq = getattr(callback, "update_freq", "epoch")
        every = "each epoch" if freq == "epoch" else f"every {freq} step(s)"
        return (
            f"TensorBoard logging {every} {took}: log every 100 steps (update_freq=100) or "
            "once per epoch, and write histograms less often (histogram_freq)"
        )
    if part.name == PROGRESS_BAR:
        return (
            f"logging every step (Keras's progress bar) {took}: log once per epoch with "
            "verbose=2, or not at all with verbose=0"
        )
    if part.name == VALIDATION:
        each = part.seconds / max(timings.validations, 1)
        cached = "parsed examples" if data_kind == "tensors" else "decoded images"
        return (
            f"validation {took}, {each:.1f} s per evaluation: validate every N epochs "
            f"(validation_freq=N) or cache its {cached} (tfpipe.Pipeline(...).cache())"
        )
    if part.name == HOST:
        per = 1000 * part.seconds / max(timings.executions, 1)
        return (
            f"host overhead between steps {took}, {per:.2f} ms per execution: "
            f"{_fewer_calls(steps_per_execution)}"
        )
    if part.name == RESTARTS and not input_kept:
        return (
            f"epoch restarts {took}: the input starts over at each epoch; keep one iterator "
            "for the run (repeat() the dataset and pass steps_per_epoch, as tfpipe.fit does "
            "for a finite tf.data input), or cache() what is decoded"
        )
    if part.name in (START_UP, END) and part.share >= START_UP_SHARE:
        what = (
            "tracing the train step, the first batch"
            if part.name == START_UP
            else ("releasing the input's iterator")
        )
        return (
            f"{part.name} ({what}) {took}: it is paid once, so a longer run spends a smaller "
            "share on it"
        )
    if part.callback and part.name != OTHER_CALLBACKS:
        return (
            f"the callback {part.name} {took}, in {_costliest_hook(part.name, timings)}: do "
            "its work every N steps (e.g. when batch % 100 == 0) or make it cheaper"
        )
    return None


def _fewer_calls(steps_per_execution: int) -> str:
    """How to spread the host's work between calls of the train function over more steps."""
    if steps_per_execution > 1:
        return f"steps_per_execution is {steps_per_execution}: raise it further"
    if one_step_per_execution():
        return (
            "do more work per step (a larger batch): Keras's PyTorch backend runs one step per call"
        )
    return "run several steps per call with model.compile(steps_per_execution=N)"


def _maps_advice(stages: InputStages) -> str:
    maps, share = ", ".join(f"Pipeline.{m}" for m in stages.maps), stages.maps_share
    if stages.random:
        return (
            f"random augmentation in {maps} is {share:.0%} of the input's CPU time: move it "
            "into the model as Keras preprocessing layers (keras.layers.RandomFlip, "
            "RandomRotation, ...), where it runs on the accelerator"
        )
    return (
        f"{maps} is {share:.0%} of the input's CPU time and not random: cache() after it, "
        "so that it runs once, or make it cheaper"
    )
