"""`FitReport`: what `tfpipe.fit` measured about the input, the model and the training run."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from tfpipe.checks import check_int
from tfpipe.training import plots
from tfpipe.training.breakdown import Breakdown
from tfpipe.training.echoing import echo_advice
from tfpipe.training.source_shares import SourceShare, slow_source_advice, table
from tfpipe.training.throughput import Throughput

INPUT_BOUND_WAIT = 0.2
CPU_SATURATED = 0.8
SHARED_CPU_WAIT = 0.1
_HEADROOM = 1.5
FAR_FASTER = 10.0
"""An input alone this many times faster than the model is not taken as the limit on an
estimated wait alone."""
_SPEEDUPS = {
    "PyDataset": "raise the loader's workers, yield uint8 batches and rescale in the model "
    "(keras.layers.Rescaling), or write TFRecords (tfpipe write) and train from a "
    "tfpipe.Pipeline, which decodes in parallel inside the graph",
    "tf.data": "map with num_parallel_calls=tf.data.AUTOTUNE, batch before a vectorised parse, "
    "interleave the file reads, cache decoded examples",
}
# The same, for data without images (tables, lists, text): nothing is decoded.
_SPEEDUPS_TENSORS = {
    "PyDataset": "raise the loader's workers, or train from a tfpipe.Pipeline (over the arrays, "
    "or over TFRecords written with tfpipe write), which gathers or parses whole batches "
    "inside the graph",
    "tf.data": "batch before a vectorised parse, interleave the file reads, cache() the parsed "
    "examples",
}
_PARSE_LESS = (
    "the data has no images, so nothing is decoded: cache() the parsed examples (a table "
    "usually fits in memory), store many scalar columns as one Tensor feature (one feature to "
    "parse per example instead of one per column), or give each step more work (a larger "
    "batch) so that the input's share of the CPU shrinks"
)
_STORE_RAW = (
    "store raw pixels at training size (tfpipe write --image-size HxW writes raw pixels: no "
    "decode at all)"
)
# What to decode less, by how the images are stored (None: unknown).
_DECODE_LESS: dict[str | None, str] = {
    None: "store images at training size (tfpipe write --image-size HxW), decode JPEGs at "
    "reduced scale, or cache decoded images",
    "jpeg": f"{_STORE_RAW}, decode at reduced scale, or cache decoded images",
    "png": f"{_STORE_RAW}, or cache decoded images",
    "auto": f"{_STORE_RAW}, decode JPEGs at reduced scale, or cache decoded images",
    "raw": "the images are raw pixels already, so nothing is left to decode: cache() the "
    "decoded batches, or give each step more work (a larger batch) so that the input's share "
    "of the CPU shrinks",
}


_SERVICE = (
    "move reading and decoding off this host with the tf.data service: run `tfpipe service "
    "dispatcher --port 5050 --host DISPATCHER` on one machine, `tfpipe service worker "
    "--dispatcher DISPATCHER:5050 --host WORKER` on each machine with spare CPUs, and train on "
    "tfpipe.Pipeline(...).distribute('grpc://DISPATCHER:5050')"
)
_NOT_TIMED = (
    "no train step was timed (none ran, or only the first execution, whose time is mostly "
    "tracing), so fit's rate, the input wait and the verdict are unknown: train for more "
    "steps (more epochs, or more batches per epoch) to measure them"
)


@dataclasses.dataclass(frozen=True)
class FitReport:
    """How fast the input and the model are on their own, and what `fit` achieved.

    The rates are measured over short probes (about a second for the model, at most two for
    the input) on a machine that may be doing other work, so they are estimates: the verdict
    and the advice read them as they came out, and the same run repeated can land on the other
    side of a threshold. Trust a verdict more when the run trained for many steps, and when
    the input alone is far faster or far slower than the model.

    Examples:
        >>> history = tfpipe.fit(model, "out/train", epochs=2, verbose=0)
        tfpipe.fit report (TFRecords input, batches of 24, ...)
        ...
        >>> report = history.report
        >>> report.input_kind, report.batch_size, report.verdict in ("input-bound", "compute-bound")
        ('TFRecords', 24, True)

    Attributes:
        input_examples_per_s: the input iterated alone, without the model.
        model_examples_per_s: train steps on one batch held in memory (no input cost); None
            when the model alone was not timed (under a multi-replica strategy).
        achieved_examples_per_s: the rate of the train steps during `fit`, without its first
            execution (tracing and start-up), validation, callbacks and the host's work
            between steps (all in `breakdown`); the restart of an input at each epoch counts.
            Examples are counted per step as an epoch's examples over its steps when both are
            known (a short last batch counts as what it holds), else as `batch_size`. None when
            no train step was timed: none ran (e.g. resumed at the last epoch), or only the
            first execution, whose time is mostly tracing.
        input_wait_fraction: share of the train steps' time lost to the input; `breakdown`
            gives it in seconds. Measured where it happens for a tf.data input on one device
            (the time the steps were blocked on their next batch; `input_wait_measured`),
            else estimated as `1 - achieved / model` clipped to [0, 1] from short probes.
            None when neither is known (no model rate, or no achieved rate).
        verdict: "input-bound" when `input_wait_fraction` exceeds 0.2, or exceeds 0.1 while the
            input alone is less than 1.5x as fast as the model (an input with little headroom
            is likely to fall behind when it shares the CPU with training), else
            "compute-bound"; an estimated wait never makes an input that is alone at least 10x
            faster than the model "input-bound" (the advice then says so). "unknown" when the
            input wait is not known (without a model rate the advice then compares the input
            alone with what fit achieved; without an achieved rate it says that no train step
            was timed). A rule over measurements of a machine that may be busy, not a proof:
            near the thresholds, repeated runs can disagree.
        advice: suggested next steps, built from the numbers above, then what `fit` decided
            and why (e.g. that `steps_per_execution` stayed 1 for an epoch of unknown length).
        input_kind: "Pipeline", "tf.data", "PyDataset" or "TFRecords".
        batch_size: examples per batch: the size the input declares (`Pipeline.batch`, the
            loader's `batch_size`, a static batch dimension) when a batch of it comes among the
            first four, else the largest of them; never just the first batch, which can be an
            epoch's short last one.
        steps_per_execution: the value used for training.
        steps_per_execution_chosen: True when tfpipe chose it, False when it was the model's.
        input_first_batch_s: seconds until the input delivered its first batch.
        image_encoding: how the input's images are stored ("jpeg", "png", "raw", "auto"), which the
            advice takes into account; None when unknown.
        data_kind: "images" when the input holds images, "tensors" when it holds none (a
            table, lists, text: the advice then never talks of decoding images); None when
            unknown.
        cpu_busy: the share of this host's cores the training process kept busy during
            `fit` (CPU time over wall time x cores); from 0.8 on, an input-bound run's
            advice names the tf.data service (`tfpipe service`, `Pipeline.distribute`), which
            moves decoding to other machines. None when not measured.
        service: the address of the tf.data service the input ran on
            (`Pipeline.distribute`); None when it ran in this process.
        breakdown: where the wall time of training went, part by part (start-up, compute,
            input wait, host overhead, validation, epoch restarts, each callback by class
            name), with the unexplained rest and advice per costly part, which also ends
            `advice`; None when `fit` was not timed.
        input_wait_measured: True when `input_wait_fraction` was measured (time blocked on
            the next batch), False when it is estimated from the rates.
        echo_factor: how many times the input repeated each example (`Pipeline.echo`; 1
            without echoing): an epoch was this many times the fresh examples, and the rates
            count the repeats (`fresh_examples_per_s` does not). An input-bound run's advice
            names the factor that would let the input keep up (at most 4 in all), the steps/s
            to expect and the cost (see `tfpipe.training.echoing`).
        sources: for a mixture (`Pipeline.sample_from`), each source's share of the
            examples, its examples/s read alone (its own Pipeline, batched as the mixture,
            over a short probe) and its share of the input time (`SourceShare`); a source
            with at least half of the input time and at least twice its share of the
            examples is named in `advice` as what to speed up first. Empty for other inputs.
    """

    input_examples_per_s: float
    model_examples_per_s: float | None
    achieved_examples_per_s: float | None
    input_wait_fraction: float | None
    verdict: str
    advice: tuple[str, ...]
    input_kind: str
    batch_size: int
    steps_per_execution: int
    steps_per_execution_chosen: bool
    input_first_batch_s: float
    image_encoding: str | None = None
    data_kind: str | None = None
    cpu_busy: float | None = None
    service: str | None = None
    breakdown: Breakdown | None = None
    input_wait_measured: bool = False
    echo_factor: int = 1
    sources: tuple[SourceShare, ...] = ()

    @property
    def fresh_examples_per_s(self) -> float | None:
        """The new examples per second fit trained on: `achieved_examples_per_s` over
        `echo_factor`; None when no train step was timed.

        Examples:
            >>> from tfpipe.training.report import FitReport
            >>> from tfpipe.training.throughput import Throughput
            >>> alone = Throughput(examples_per_s=3600.0, batches_per_s=112.5, first_batch_s=0.4,
            ...                    batches=50, examples=1600)
            >>> echoed = FitReport.build(input_alone=alone, model_examples_per_s=2000.0,
            ...                          achieved_examples_per_s=1800.0, input_kind="Pipeline",
            ...                          batch_size=32, steps_per_execution=1,
            ...                          steps_per_execution_chosen=False, echo_factor=2)
            >>> echoed.echo_factor, echoed.fresh_examples_per_s  # 1,800 examples/s, each twice
            (2, 900.0)
        """
        if self.achieved_examples_per_s is None:
            return None
        return self.achieved_examples_per_s / self.echo_factor

    @classmethod
    def build(
        cls,
        *,
        input_alone: Throughput,
        model_examples_per_s: float | None,
        achieved_examples_per_s: float | None,
        input_kind: str,
        batch_size: int,
        steps_per_execution: int,
        steps_per_execution_chosen: bool,
        measured_wait: float | None = None,
        image_encoding: str | None = None,
        data_kind: str | None = None,
        notes: tuple[str, ...] = (),
        cpu_busy: float | None = None,
        service: str | None = None,
        breakdown: Breakdown | None = None,
        echo_factor: int = 1,
        sources: tuple[SourceShare, ...] = (),
    ) -> FitReport:
        """Derives the wait fraction, the verdict and the advice from the measurements.

        `measured_wait` is the share of the train steps' time blocked on the next batch, when
        it was measured; else the wait is estimated from the achieved and model-alone rates.

        The advice follows the data: how images are stored (`image_encoding`), or, for data
        without images (`data_kind="tensors"`), what helps parsing, and where it runs: an
        input-bound run on a saturated CPU (`cpu_busy`) is pointed at the tf.data service, one
        on the service (`service`, the dispatcher's address) at more workers. The `breakdown`'s
        advice (per costly part of training) follows, and `notes` (what `fit` decided and
        why, e.g. why `steps_per_execution` stayed 1) end the advice. An input-bound run's
        advice names data echoing (`tfpipe.training.echoing`), judged on the fresh examples of
        an input that repeated each `echo_factor` times already. Without
        `model_examples_per_s` (the model alone not timed) the input wait is not measured: the
        verdict is "unknown", and the advice compares the input alone with what fit achieved.
        Without `achieved_examples_per_s` (no train step timed) the verdict is "unknown" too,
        and the advice says why. A mixture's `sources` (`tfpipe.training.source_shares`) add
        their table, and a line naming a source that takes far more of the input time than of
        the examples.

        Examples:
            >>> from tfpipe.training.throughput import Throughput
            >>> input_alone = Throughput(examples_per_s=900.0, batches_per_s=28.1,
            ...                          first_batch_s=0.4, batches=50, examples=1600)
            >>> from tfpipe.training.report import FitReport
            >>> report = FitReport.build(
            ...     input_alone=input_alone, model_examples_per_s=2000.0,
            ...     achieved_examples_per_s=850.0, input_kind="Pipeline", batch_size=32,
            ...     steps_per_execution=1, steps_per_execution_chosen=False, image_encoding="jpeg")
            >>> report.verdict, round(report.input_wait_fraction, 2)
            ('input-bound', 0.57)
            >>> print(report.advice[1])
            the input alone is slower than the model: store raw pixels at training size ...
        """
        echo_factor = check_int("echo_factor", echo_factor)
        decode_less, speedups = _remedies(data_kind, image_encoding)
        if achieved_examples_per_s is None:
            wait, verdict, advice = None, "unknown", [_NOT_TIMED]
        elif model_examples_per_s is None:
            wait, verdict = None, "unknown"
            advice = _unmeasured(input_alone.examples_per_s, achieved_examples_per_s, decode_less)
        else:
            wait, verdict, advice = _reading(
                input_alone.examples_per_s,
                model_examples_per_s,
                achieved_examples_per_s,
                measured_wait,
            )
            if verdict == "input-bound":
                advice += _input_bound(
                    input_alone=input_alone.examples_per_s,
                    model=model_examples_per_s,
                    achieved=achieved_examples_per_s,
                    input_kind=input_kind,
                    batch_size=batch_size,
                    remedy=speedups.get(input_kind, decode_less),
                    decode_less=decode_less,
                    service=service,
                    cpu_busy=cpu_busy,
                    echo_factor=echo_factor,
                )
            else:
                advice += _compute_bound(
                    input_alone.examples_per_s / model_examples_per_s, decode_less
                )
        advice[1:1] = slow_source_advice(sources)  # after the reading, before the remedies
        if breakdown is not None:
            advice.extend(breakdown.advice)
        advice.extend(notes)
        return cls(
            input_examples_per_s=input_alone.examples_per_s,
            model_examples_per_s=model_examples_per_s,
            achieved_examples_per_s=achieved_examples_per_s,
            input_wait_fraction=wait,
            verdict=verdict,
            advice=tuple(advice),
            input_kind=input_kind,
            batch_size=batch_size,
            steps_per_execution=steps_per_execution,
            steps_per_execution_chosen=steps_per_execution_chosen,
            input_first_batch_s=input_alone.first_batch_s,
            image_encoding=image_encoding,
            data_kind=data_kind,
            cpu_busy=cpu_busy,
            service=service,
            breakdown=breakdown,
            input_wait_measured=measured_wait is not None and wait is not None,
            echo_factor=echo_factor,
            sources=tuple(sources),
        )

    def __str__(self) -> str:
        chosen = "chosen by tfpipe" if self.steps_per_execution_chosen else "the model's"
        lines = [
            f"tfpipe.fit report ({self.input_kind} input, batches of {self.batch_size}, "
            f"steps_per_execution={self.steps_per_execution}, {chosen})",
            f"  input alone      {self.input_examples_per_s:>12,.1f} examples/s "
            f"(first batch after {self.input_first_batch_s:.2f} s)",
            f"  model alone      {_rate(self.model_examples_per_s)}",
            f"  achieved in fit  {_rate(self.achieved_examples_per_s)}",
            *(
                [
                    f"  echoed           {self.echo_factor:>12}x: "
                    f"{_rate(self.fresh_examples_per_s).strip()} fresh, an epoch "
                    f"{self.echo_factor}x the fresh examples"
                ]
                if self.echo_factor > 1
                else []
            ),
            "  input wait       "
            + (
                f"{self.input_wait_fraction:>12.0%} of the train steps' time, "
                + (
                    "measured (blocked on the next batch)"
                    if self.input_wait_measured
                    else "estimated (1 - achieved / model alone)"
                )
                if self.input_wait_fraction is not None
                else "not measured (no train step was timed)"
                if self.achieved_examples_per_s is None
                else "not measured (the model alone was not timed)"
            ),
            *(
                [f"  CPU busy         {self.cpu_busy:>12.0%} of this host's cores"]
                if self.cpu_busy is not None
                else []
            ),
            *([f"  input served by  tf.data service at {self.service}"] if self.service else []),
            *(f"  {line}" for line in table(self.sources)),
            *(f"  {line}" for line in (self.breakdown.lines() if self.breakdown else [])),
            f"  verdict: {self.verdict}",
            *(f"  - {line}" for line in self.advice),
        ]
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Draws the three throughputs and one bar of training time, a segment per part of
        the `breakdown` (without one, input wait and compute).

        Needs matplotlib (`pip install "tfpipe[plot]"`); the format follows the suffix.

        Examples:
            >>> from tfpipe.training.throughput import Throughput
            >>> from tfpipe.training.report import FitReport
            >>> report = FitReport.build(
            ...     input_alone=Throughput(900.0, 28.1, 0.4, 50, 1600), model_examples_per_s=2000.0,
            ...     achieved_examples_per_s=850.0, input_kind="Pipeline", batch_size=32,
            ...     steps_per_execution=1, steps_per_execution_chosen=False)
            >>> report.plot("fit-report.png")  # or history.report.plot(...) after tfpipe.fit
            PosixPath('fit-report.png')

        Args:
            path: the image file to write, e.g. "fit-report.png" or "fit-report.svg".

        Returns:
            The path written.
        """
        if self.breakdown is None:
            wait = self.input_wait_fraction or 0.0
            names, shares = ["computing", "waiting"], [1 - wait, wait]
            if self.input_wait_fraction is None:
                names, shares = ["training (input wait not measured)"], [1.0]
        else:
            shares_by_name = self.breakdown.shares()
            names, shares = list(shares_by_name), list(shares_by_name.values())
        height = max(2.8, 0.25 * len(names) + 0.6)  # the legend lists every part
        figure, (rates, split) = plots.new_figure(12, height, columns=2)
        measured = {
            "input alone": self.input_examples_per_s,
            "model alone": self.model_examples_per_s,
            "achieved in fit": self.achieved_examples_per_s,
        }
        plots.throughput_bars(
            rates,
            [name for name, rate in measured.items() if rate is not None],
            [rate for rate in measured.values() if rate is not None],
            f"{self.input_kind} input, batches of {self.batch_size}",
        )
        plots.stacked_bar(split, names, shares, f"training time by part; verdict: {self.verdict}")
        return plots.save(figure, path)


def _remedies(data_kind: str | None, image_encoding: str | None) -> tuple[str, dict[str, str]]:
    """What makes the input cheaper by what it holds: decoding (or parsing) less, and the
    speed-ups per kind of input."""
    if data_kind == "tensors":
        return _PARSE_LESS, _SPEEDUPS_TENSORS
    return _DECODE_LESS.get(image_encoding, _DECODE_LESS[None]), _SPEEDUPS


def _reading(
    input_alone: float, model: float, achieved: float, measured_wait: float | None
) -> tuple[float, str, list[str]]:
    """The input wait (measured, else estimated from the rates), the verdict, and the advice
    that states them, from the examples/s of the input alone, the model alone and fit."""
    estimate = min(1.0, max(0.0, 1.0 - achieved / model))
    wait = estimate if measured_wait is None else min(1.0, max(0.0, measured_wait))
    headroom = input_alone / model
    slow_input = wait > SHARED_CPU_WAIT and headroom < _HEADROOM
    waits = wait > INPUT_BOUND_WAIT or slow_input
    # An estimate is the gap between two short probes and fit: on a busy machine it can be
    # noise; it does not overrule an input many times faster than the model.
    overruled = waits and measured_wait is None and headroom >= FAR_FASTER
    verdict = "input-bound" if waits and not overruled else "compute-bound"
    how = "measured" if measured_wait is not None else "estimated"
    advice = [
        f"input delivers {input_alone:,.0f} examples/s alone, the model consumes {model:,.0f} "
        f"examples/s alone, fit achieved {achieved:,.0f} examples/s ({wait:.0%} of the train "
        f"steps' time waiting for input, {how})"
    ]
    if overruled:
        advice.append(
            f"the estimated wait ({wait:.0%}, 1 - achieved / model alone) is not put down to "
            f"the input, which alone is {headroom:.0f}x faster than the model: the probes and "
            "fit ran under different loads of this machine"
        )
    return wait, verdict, advice


def _input_bound(
    *,
    input_alone: float,
    model: float,
    achieved: float,
    input_kind: str,
    batch_size: int,
    remedy: str,
    decode_less: str,
    service: str | None,
    cpu_busy: float | None,
    echo_factor: int,
) -> list[str]:
    """The advice for an input-bound run, from the examples/s of the input alone, the model
    alone and fit: what makes this kind of input faster (`remedy`) when it is slower than the
    model, decoding or parsing less (`decode_less`) when it competes with the model for the
    CPU, where it should run (unless on the tf.data `service` already, `cpu_busy`), and data
    echoing (on the fresh examples of an input echoed `echo_factor` times)."""
    advice = []
    if service is None and input_alone < model:
        advice.append(f"the input alone is slower than the model: {remedy}")
    elif service is None:
        advice.append(
            f"the input is fast enough alone but competes with the model for the CPU: {decode_less}"
        )
    return [
        *advice,
        *_placement(service, cpu_busy),
        *echo_advice(
            input_kind=input_kind,
            batch_size=batch_size,
            delivered=min(input_alone, achieved),
            model=model,
            achieved=achieved,
            echo_factor=echo_factor,
        ),
    ]


def _compute_bound(headroom: float, decode_less: str) -> list[str]:
    """The advice for a compute-bound run whose input alone is `headroom` times as fast as the
    model: speed the model up, and decode or parse less when that headroom is small."""
    advice = [
        "the input keeps up: speed up the model itself (larger batches, mixed precision, "
        "jit_compile=True) or train on an accelerator"
    ]
    if headroom < _HEADROOM:
        advice.append(
            f"the input is only {headroom:.1f}x faster than the model: it becomes the limit on "
            f"faster hardware; {decode_less}"
        )
    return advice


def _placement(service: str | None, cpu_busy: float | None) -> list[str]:
    """Advice on where an input-bound run's input should run: on the tf.data service when
    this host's CPU is saturated, on more of its workers when it runs there already."""
    if service is not None:
        return [
            f"the input runs on the tf.data service at {service}: add workers (`tfpipe service "
            f"worker --dispatcher {service.split('://', 1)[1]}` on more machines), and write at "
            "least as many shards as workers (each file goes to one worker)"
        ]
    if cpu_busy is not None and cpu_busy >= CPU_SATURATED:
        return [f"this host's CPU is saturated ({cpu_busy:.0%} busy during training): {_SERVICE}"]
    return []


def _rate(examples_per_s: float | None) -> str:
    if examples_per_s is None:
        return "not measured"
    return f"{examples_per_s:>12,.1f} examples/s"


def _unmeasured(input_alone: float, achieved: float, decode_less: str) -> list[str]:
    """The advice when the input wait was not measured: the input alone against fit."""
    headroom = input_alone / max(achieved, 1e-9)
    reading = (
        f"it may be what limits training; {decode_less}"
        if headroom < _HEADROOM
        else "it is unlikely to be what limits training"
    )
    return [
        f"input wait was not measured (the model alone was not timed), so the verdict is "
        f"unknown: the input alone delivers {input_alone:,.0f} examples/s, {headroom:.1f}x the "
        f"{achieved:,.0f} examples/s fit achieved; {reading}"
    ]
