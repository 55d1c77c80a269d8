"""A weighted mixture of Pipelines (`Pipeline.sample_from`): the input of a mixed `Pipeline`.

    sources (Pipelines) ──epoch_counts: each source's examples per epoch, exact──▶ counts
    epoch e: choices = the source of every example, counts[i] times i, in a stateless
        permutation of (seed, e) ──choose_from_datasets──▶ one example at a time from each
        source's own stream (its epochs one after the other, each in its own order)

Every source is read as its own Pipeline reads it (decoded, its maps applied, unbatched); the
mixture only picks the next source. With `start_at`, epoch e takes examples
[e·counts[i], (e+1)·counts[i]) of source i's stream (a source cycles through its epochs as
needed, each in the order of (its seed, its epoch)), so a position is `(epoch, batch)` and the
sources' positions are computed from the choices before it: nothing else is saved.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, cast

import tensorflow as tf

from tfpipe.errors import SchemaError, SourceError, TfpipeWarning
from tfpipe.loaders.assembly import assemble, count_records, examples_from, explain
from tfpipe.loaders.distributed_pipeline import worker_examples
from tfpipe.loaders.inputs import Decoders, Decoding, Reading, Shard, Stage, Start
from tfpipe.loaders.recipe import Recipe
from tfpipe.loaders.seeding import without_global_seed
from tfpipe.records.verification import Fault
from tfpipe.schema import Schema

STOPPING_STRATEGIES = ("first_exhausted", "all_exhausted")


@dataclasses.dataclass(frozen=True)
class Mixture:
    """What a mixed `Pipeline` mixes (`Pipeline.mixture`).

    Attributes:
        names: each source, as messages and `explain()` name it.
        weights: each source's share of the examples, summing to 1.
        counts: each source's examples in one epoch (summing to `examples_per_epoch`).
        seed: the seed of the choices (and of the sources shuffled without a seed of their own).
        stopping_strategy: how the epoch was sized, or "examples_per_epoch" when it was given.
    """

    names: tuple[str, ...]
    weights: tuple[float, ...]
    counts: tuple[int, ...]
    seed: int
    stopping_strategy: str

    @property
    def examples_per_epoch(self) -> int:
        """The examples of one epoch of the mixture."""
        return sum(self.counts)


def mixable(source: Recipe, where: str, seed: int) -> Recipe:
    """A source's recipe as a mixture reads it: refused, naming `where`, when it batches,
    yields pairs or starts elsewhere (the mixture does that); an unseeded shuffle gets `seed`.
    """
    for wrong, fix in (
        (source.batch is not None, "batch() the mixture instead"),
        (source.supervised is not None, "call as_supervised() on the mixture instead"),
        (source.start is not None, "call start_at() on the mixture instead"),
        (source.repeat != 0, "repeat() the mixture instead (a source cycles as needed)"),
        (source.echoing is not None, "echo() the mixture instead"),
        (source.schema is None, "a PyDataset yields its own batches: mix records or sources"),
    ):
        if wrong:
            raise ValueError(f"Pipeline.sample_from: {where} ({source.name}): {fix}")
    if source.shuffle and source.seed is None:
        return source.replace(seed=seed)
    return source


def check_weights(weights: Any, count: int) -> tuple[Fraction, ...]:
    """`weights` (None: equal) as exact fractions summing to 1; a ValueError names a wrong one.

    Examples:
        >>> [str(w) for w in check_weights([3, 1], 2)]
        ['3/4', '1/4']
    """
    if weights is None:
        weights = [1] * count
    weights = list(weights)
    if len(weights) != count:
        raise ValueError(
            f"weights must give one weight per source ({count}). Received: weights={weights!r}"
        )
    for weight in weights:
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not (math.isfinite(weight) and weight >= 0)
        ):
            raise ValueError(f"weights must be finite numbers >= 0. Received: weights={weights!r}")
    # 0.7 is stored as 0.69999999999999995559: as a fraction, 7/10 again.
    exact = [Fraction(w).limit_denominator(10**9) for w in weights]
    total = sum(exact)
    if total == 0:
        raise ValueError(f"weights must not all be 0. Received: weights={weights!r}")
    return tuple(w / total for w in exact)


def epoch_size(sizes: Sequence[int], weights: Sequence[Fraction], stopping_strategy: str) -> int:
    """The examples of an epoch: until the first source is used up at its weight
    ("first_exhausted": every example of that source once, of the others as many as their
    weights ask), or the last ("all_exhausted": every example of every source at least once,
    the others cycling).

    Examples:
        >>> half = [Fraction(1, 2)] * 2
        >>> [epoch_size([100, 30], half, end) for end in ("first_exhausted", "all_exhausted")]
        [60, 200]
    """
    if stopping_strategy not in STOPPING_STRATEGIES:
        raise ValueError(
            f"stopping_strategy must be one of {STOPPING_STRATEGIES}. "
            f"Received: stopping_strategy={stopping_strategy!r}"
        )
    needs = [Fraction(size) / weight for size, weight in zip(sizes, weights, strict=True) if weight]
    if stopping_strategy == "first_exhausted":
        return math.floor(min(needs))
    return math.ceil(max(needs))


def epoch_counts(total: int, weights: Sequence[Fraction]) -> tuple[int, ...]:
    """`total` examples shared by `weights` (largest remainders): each count within 1 of its
    exact share, summing to `total`.

    Examples:
        >>> epoch_counts(10, [Fraction(1, 3)] * 3)
        (4, 3, 3)
    """
    shares = [total * weight for weight in weights]
    counts = [math.floor(share) for share in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return tuple(counts)


def agreed_schema(
    specs: Sequence[Any], schemas: Sequence[Schema], names: Sequence[str]
) -> tuple[Schema, list[str]]:
    """The features every source gives alike (the mixture's schema), and those only some give;
    a SchemaError names a feature that two sources give differently, and both sources."""
    shared = [name for name in schemas[0] if all(name in spec for spec in specs)]
    for name in shared:
        for spec, schema, source in zip(specs[1:], schemas[1:], names[1:], strict=True):
            if spec[name] != specs[0][name]:
                raise SchemaError(
                    f"Pipeline.sample_from: feature {name!r} differs between the sources: "
                    f"{names[0]} gives {_spec_text(specs[0][name])} ({schemas[0][name]!r}), "
                    f"{source} gives {_spec_text(spec[name])} ({schema[name]!r}). Give the "
                    "sources the same image_size=, rescale= and pad=, or rename() one's "
                    "feature to another name"
                )
    extra = sorted({n for spec in specs for n in spec} - set(shared))
    if not shared:
        raise SchemaError(
            "Pipeline.sample_from: the sources share no feature ("
            + "; ".join(f"{n}: {sorted(spec)}" for n, spec in zip(names, specs, strict=True))
            + "): rename() the features that mean the same to the same name"
        )
    return Schema({name: schemas[0][name] for name in shared}), extra


def _spec_text(spec: Any) -> str:
    return f"{spec.dtype.name} of shape {tuple(spec.shape)}"


@dataclasses.dataclass(frozen=True)
class _Share:
    """The sources one worker reads (all of them, or shard `index` of `num` of each), with
    their examples per epoch and the examples each gives to an epoch of the mixture."""

    sources: tuple[Recipe, ...]
    sizes: tuple[int, ...]
    counts: tuple[int, ...]


class MixtureInput:
    """The input of a mixed Pipeline: decoded examples chosen from its sources' streams."""

    decoded = True
    servable = False  # the sources are distributed one by one, before they are mixed
    positioned = True  # read() starts every source at its place for a start_at position

    def __init__(
        self,
        sources: Sequence[Recipe],
        weights: Sequence[Fraction],
        *,
        seed: int,
        examples_per_epoch: int | None,
        stopping_strategy: str,
    ) -> None:
        self.sources = tuple(sources)
        self.weights = tuple(weights)
        self.seed = seed
        names = [f"source {i} ({s.input.name})" for i, s in enumerate(self.sources)]
        sizes = [self._size(source, name) for source, name in zip(self.sources, names, strict=True)]
        if examples_per_epoch is None:
            total = epoch_size(sizes, self.weights, stopping_strategy)
        else:
            total, stopping_strategy = examples_per_epoch, "examples_per_epoch"
        if total < 1:
            raise ValueError(
                f"Pipeline.sample_from: an epoch of the mixture would hold no example "
                f"({stopping_strategy}); give examples_per_epoch= or larger sources"
            )
        self.sizes = tuple(sizes)
        self._plans: dict[int, list[str]] = {}
        counts = epoch_counts(total, self.weights)
        # explained: the spec without registering a served source with its dispatcher
        specs = [assemble(s, explain=True)[0].element_spec for s in self.sources]
        schemas = [cast(Schema, s.schema) for s in self.sources]  # mixable() refused None
        self.schema, self.left_out = agreed_schema(specs, schemas, names)
        self.mixture = Mixture(
            names=tuple(str(s.input.name) for s in self.sources),
            weights=tuple(float(w) for w in self.weights),
            counts=counts,
            seed=seed,
            stopping_strategy=stopping_strategy,
        )
        self.num_examples = total
        self.name = "a mixture of " + ", ".join(self.mixture.names)
        self.replayable = all(s.replayable for s in self.sources)

    @staticmethod
    def _size(source: Recipe, name: str) -> int:
        size = source.examples_per_epoch()
        if size is None and not source.filtered and source.shard is None and source.replayable:
            started = time.perf_counter()
            size = count_records(source)
            warnings.warn(
                f"Pipeline.sample_from: {name} has no tfpipe metadata: its {size} records were "
                f"counted by reading them ({time.perf_counter() - started:.1f} s), as every "
                "source's count sizes the epochs (write it with tfpipe.write_tfrecords to skip "
                "this)",
                TfpipeWarning,
                stacklevel=5,  # the call of Pipeline.sample_from
            )
        if size is None:
            raise SourceError(
                f"Pipeline.sample_from: {name}: its examples per epoch are unknown (a "
                "filter(), a shard() or a PyDataset); a mixture sizes its epochs from every "
                "source's count"
            )
        if size == 0:
            raise SourceError(f"Pipeline.sample_from: {name} holds no example")
        return size

    def _share(self, shard: Shard) -> _Share:
        if shard is None:
            return _Share(self.sources, self.sizes, self.mixture.counts)
        num, index = shard
        sources = tuple(s.part(num, index) for s in self.sources)
        sizes = tuple(worker_examples(s, num)[0][index] for s in self.sources)
        counts = tuple(split[index] for split in self._splits(num))
        return _Share(sources, sizes, counts)

    def _splits(self, workers: int) -> list[tuple[int, ...]]:
        """Each source's examples per epoch dealt out to `workers` in proportion to the part
        of the source each reads: a source read once per epoch is read once over them all."""
        splits = []
        for source, size, count in zip(self.sources, self.sizes, self.mixture.counts, strict=True):
            parts = worker_examples(source, workers)[0]
            splits.append(epoch_counts(count, [Fraction(part, size) for part in parts]))
        return splits

    def worker_counts(self, workers: int) -> list[int]:
        """The examples of an epoch each of `workers` reads (`build_distributed`)."""
        return [sum(split[w] for split in self._splits(workers)) for w in range(workers)]

    def read(
        self, shard: Shard, seed: Any, shuffle: bool, det: bool, start: Start = None
    ) -> Reading:
        """The stage yielding the examples of one epoch (from `start`, the `(epoch, example)`
        of a `start_at` epoch, with every source's stream at the right place)."""
        share = self._share(shard)
        parts = ", ".join(
            f"{name} {count} ({weight:.1%})"
            for name, count, weight in zip(
                self.mixture.names, share.counts, self.mixture.weights, strict=True
            )
        )
        plans = [
            f"\n      source {i}: " + "\n                ".join(self._plan(source))
            for i, source in enumerate(share.sources)
        ]
        left_out = f"\n      left out (not in every source): {', '.join(self.left_out)}"
        label = (
            f"mix {len(self.sources)} sources one example at a time (seed={self.seed}; "
            f"examples per epoch: {parts}):{''.join(plans)}" + (left_out if self.left_out else "")
        )
        return [(label, lambda _: self._examples(share, start))], False

    def _plan(self, source: Recipe) -> list[str]:
        """The stages of a source, as its own `explain()` lists them (made once)."""
        key = id(source)
        if key not in self._plans:
            self._plans[key] = explain(source).splitlines()
        return self._plans[key]

    def _examples(self, share: _Share, start: tuple[Any, Any] | None) -> tf.data.Dataset:
        choices = tf.repeat(tf.range(len(share.sources), dtype=tf.int64), share.counts)
        key = tf.constant(self.seed, tf.int64)
        keep = list(self.schema)
        if start is None:  # a new order every epoch; every source read as it reads itself
            streams = [assemble(s.replace(repeat=None))[0] for s in share.sources]
            numbers = without_global_seed(
                lambda: tf.data.Dataset.random(seed=self.seed, rerandomize_each_iteration=True)
            )
            return numbers.take(1).flat_map(
                tf.autograph.experimental.do_not_convert(
                    lambda n: _chosen(streams, _order(choices, key, n), keep)
                )
            )
        number, skip = (tf.cast(part, tf.int64) for part in start)
        order = _order(choices, key, number)
        done = tf.math.bincount(
            order[:skip], minlength=len(share.sources), maxlength=len(share.sources), dtype=tf.int64
        )
        streams = []
        for i, (source, size, count) in enumerate(
            zip(share.sources, share.sizes, share.counts, strict=True)
        ):
            at = number * count + done[i]
            streams.append(examples_from(source, at // size, at % size))
        return _chosen(streams, order[skip:], keep)

    def identity(self) -> list[bytes | str]:
        """What identifies the examples: every source's, the weights, counts and seed."""
        parts: list[bytes | str] = []
        for source in self.sources:
            parts += [*source.input.identity(), repr((source.take, source.seed, source.shuffle))]
        return [*parts, repr(self.mixture)]

    def describe(self) -> str:
        weights = ", ".join(str(w.limit_denominator(1000)) for w in self.weights)
        return f"{self.name} (weights {weights}, {self.num_examples} examples per epoch)"

    def record_buffer(self, buffer: int | None) -> int:
        """0: a mixture is not shuffled (`Pipeline.shuffle` refuses), its sources are."""
        return 0

    def declared_counts(self) -> list[int]:
        """None: the mixture has no files of its own (workers split its epoch by records)."""
        return []

    def service_splits(self) -> str:
        return "its sources, each distributed by itself"

    def decoder(self, decoding: Decoding, defer_images: bool = False) -> Stage:
        raise TypeError("a mixture yields decoded examples: its sources decode them")

    def defers_images(self) -> bool:
        return False

    def image_decoders(self, decoding: Decoding) -> Decoders:
        raise TypeError("a mixture yields decoded examples: its sources decode them")

    def loader(self, det: bool) -> list[Stage]:
        """No stages: `read` yields the examples."""
        return []

    def locate_fault(self, decoding: Decoding) -> Fault | None:
        """The first damaged record or file of the first source that has one."""
        for source in self.sources:
            fault = source.input.locate_fault(source.decoding)
            if fault is not None:
                return fault
        return None


def _order(choices: tf.Tensor, key: tf.Tensor, number: tf.Tensor) -> tf.Tensor:
    """The choices of one epoch in the stateless order of (seed, epoch)."""
    return tf.random.experimental.stateless_shuffle(choices, tf.stack([key, number]))


def _chosen(streams: list[tf.data.Dataset], order: tf.Tensor, keep: list[str]) -> tf.data.Dataset:
    same = [s.map(lambda ex: {name: ex[name] for name in keep}) for s in streams]
    return tf.data.Dataset.choose_from_datasets(same, tf.data.Dataset.from_tensor_slices(order))
