"""What a `Pipeline`'s builder methods asked for, as one immutable value.

Pipeline(...).shuffle().map(f).batch(64) ──each method: a new Recipe──▶ Recipe
    ──assembly.build──▶ tf.data.Dataset;  ──distributed_pipeline──▶ one part per worker
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tfpipe.checks import check_int
from tfpipe.loaders.echo import Echo
from tfpipe.loaders.inputs import AUTOTUNE, Decoding, PipelineInput
from tfpipe.loaders.padding import Padding
from tfpipe.loaders.position import Identity, digest
from tfpipe.loaders.service import DataService
from tfpipe.loaders.transforms import Transform, renamed_schema
from tfpipe.schema import Schema

DEFAULT_BATCH = 64  # the records batched for a vectorised parse without a batch()


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """`tf.data.Options` the pipeline sets; see `Pipeline.options`."""

    deterministic: bool | None = None
    ram_budget_mb: int | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.deterministic not in (None, True, False):
            raise ValueError(
                f"deterministic must be True, False or None. Received: {self.deterministic!r}"
            )
        if self.ram_budget_mb is not None:
            check_int("ram_budget_mb", self.ram_budget_mb)
        if self.threads is not None:
            check_int("threads", self.threads)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A pipeline's input, decoding and every builder method's setting (see `Pipeline`)."""

    input: PipelineInput
    decoding: Decoding
    padding: Padding
    seed: int | None = None
    shuffle: bool = False
    buffer: int | None = None
    transforms: tuple[Transform, ...] = ()
    batch: tuple[int, bool] | None = None  # (size, drop_remainder)
    cache: tuple[str, int] | None = None  # (path, how many transforms come before it)
    prefetch: int = AUTOTUNE
    repeat: int | None = 0  # None: forever
    take: int | None = None
    shard: tuple[int, int] | None = None  # (num, index)
    options: PipelineOptions = PipelineOptions()
    supervised: tuple[Any, Any] | None = None
    start: tuple[int, int] | None = None  # (epoch, batch)
    epoch_batches: int | None = None  # build_distributed's steps of a worker's epoch
    service: DataService | None = None
    echo: Echo | None = None

    def replace(self, **changes: Any) -> Recipe:
        """This recipe with `changes` (field name -> value)."""
        return dataclasses.replace(self, **changes)

    def part(self, workers: int, worker: int) -> Recipe:
        """Worker `worker`'s part of `workers` (`shard`); on the tf.data service, a job of its
        own (`DataService.for_worker`)."""
        service = None if self.service is None else self.service.for_worker(worker)
        return self.replace(shard=(workers, worker), service=service)

    @property
    def batch_size(self) -> int:
        """The size of `batch()`, else the default size records are parsed in."""
        return (self.batch or (DEFAULT_BATCH, False))[0]

    @property
    def schema(self) -> Schema | None:
        """The input's schema, with the names `Pipeline.rename` gave."""
        return renamed_schema(self.input.schema, self.transforms)

    @property
    def replayable(self) -> bool:
        """Whether every run reads the same records: a replayable input, not on the service."""
        return self.input.replayable and self.service is None

    @property
    def filtered(self) -> bool:
        """Whether a `filter()` is among the transforms."""
        return any(not t.maps for t in self.transforms)

    @property
    def name(self) -> str:
        """The input, for messages: its name, else its type."""
        return repr(self.input.name)

    def check_replayable(self, epoch: int, batch: int) -> None:
        """Refuses, naming why, a `start_at(epoch, batch)` whose batches could differ from an
        uninterrupted run's."""
        echo_unseeded = self.echoing is not None and self.seed is None
        for wrong, why in (
            (self.shuffle and self.seed is None, "shuffle() has no seed: pass shuffle(seed=0)"),
            (echo_unseeded, "echo() orders its windows at random: pass shuffle(seed=0)"),
            (self.options.deterministic is False, "options(deterministic=False) is set"),
            (self.cache is not None, "cache() is set: decoded examples cannot be skipped"),
            (self.filtered, "a filter() changes batches"),
            (
                not self.input.replayable,
                "the source is a keras.utils.PyDataset, or a mixed source is one or runs on the "
                "tf.data service (distribute(): its workers decide who reads what); mix "
                "sources read in this process to resume",
            ),
            (self.repeat not in (0, None) and epoch >= self.repeat, "repeat() ends before"),
        ):
            if wrong:
                raise ValueError(
                    f"start_at(epoch={epoch}, batch={batch}) needs the same batches in every "
                    f"run, but {why}"
                )

    def identity(self) -> Identity:
        """See `Pipeline.identity`."""
        inp = self.input
        parts = [*inp.identity(), repr((self.take, self.shard, self.batch))]
        echo, window = self.echoing, self.echo_window
        described = "" if echo is None else f"{echo.factor} per {echo.unit}, window {window}"
        size = self.batch_size
        return Identity(digest(parts), inp.describe(), size, self.seed or 0, echo=described)

    @property
    def echoing(self) -> Echo | None:
        """The `echo()` asked for, when it repeats anything (a factor above 1)."""
        return self.echo if self.echo is not None and self.echo.factor > 1 else None

    @property
    def echo_window(self) -> int:
        """The elements of an echo window (see `Echo.window`)."""
        count = self.input.num_examples
        fresh = count if self.take is None or count is None else min(count, self.take)
        return (self.echo or Echo(1, "example")).window(fresh)

    def fresh_examples(self) -> int | None:
        """The examples read in one pass, before any echo; None when unknown."""
        count = self.input.num_examples
        copies = self.service is not None and self.service.mode == "off"
        if count is None or self.filtered or self.shard is not None or copies:
            return None
        return int(count if self.take is None else min(count, self.take))

    def examples_per_epoch(self) -> int | None:
        """See `Pipeline.examples_per_epoch`."""
        count = self.fresh_examples()
        if count is None:
            return None
        by_batch = self.echoing is not None and self.echoing.unit == "batch"
        factor = 1 if self.echoing is None else self.echoing.factor
        if self.batch is not None and self.batch[1]:
            size = self.batch[0]
            return factor * (count - count % size) if by_batch else (factor * count) // size * size
        return factor * count

    def batches_per_epoch(self) -> int | None:
        """See `Pipeline.batches_per_epoch`."""
        count = self.examples_per_epoch()
        if count is None or self.batch is None:
            return None
        if self.echoing is not None and self.echoing.unit == "batch":
            factor = self.echoing.factor
            return factor * math.ceil(count // factor / self.batch[0])
        return math.ceil(count / self.batch[0])
