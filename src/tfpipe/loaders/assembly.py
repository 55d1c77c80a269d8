"""The `tf.data` graph of a `Pipeline`: what `build()` runs and `explain()` lists.

Whatever order the builder methods are called in, `build()` emits the stages in the order the
tf.data performance guide recommends::

    file list shuffle -> interleaved parallel reads -> record shuffle (serialized bytes, cheap)
    -> batch -> vectorised parse_example -> per-element decode/resize (parallel map)
    -> cache (after deterministic decoding, before random maps) -> user maps (parallel)
    -> batch -> as_supervised -> prefetch(AUTOTUNE)

With maps and no cache, images are decoded after the unbatch the maps need, one example at a
time in the first map's parallel calls (JPEG orientations read per batch before it), rather
than in a `tf.map_fn` over each batch.
"""

from __future__ import annotations

import contextvars
import functools
import math
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfpipe.errors import SchemaError, SourceError, TfpipeWarning
from tfpipe.features.tracing import plain
from tfpipe.loaders import lists
from tfpipe.loaders.echo import echoed, window_seeds
from tfpipe.loaders.inputs import AUTOTUNE, Stage
from tfpipe.loaders.recipe import DEFAULT_BATCH, Recipe
from tfpipe.loaders.seeding import shuffled, stage_seed
from tfpipe.loaders.service import DataService, stall_message
from tfpipe.loaders.supervised import check_known, selector
from tfpipe.records.reader import NamedDataset
from tfpipe.records.verification import from_input, named_error

_EXAMPLE_BUFFER = 1024
_FOREVER = 2**62  # the epoch a pipeline repeated forever never reaches
_ECHO_STAGE = 2**31  # the stage number of the echo's seed (see stage_seed), past every map's
_SEED_TENSOR = re.compile(r"seed=Tensor\(.*?dtype=\w+\)")
# Set while a plan is explained: the recipes a mixture assembles inside it (its sources) are
# explained too, so that explain() never contacts a tf.data service dispatcher.
_EXPLAINING = contextvars.ContextVar("explaining", default=False)


def build(recipe: Recipe) -> tf.data.Dataset:
    """See `Pipeline.build`."""
    dataset, _ = assemble(recipe)
    return NamedDataset(dataset, functools.partial(_named_error, recipe))


def explain(recipe: Recipe) -> str:
    """See `Pipeline.explain`."""
    _, labels = assemble(recipe, explain=True)
    return "\n".join(f"{i:2d}. {label}" for i, label in enumerate(labels, 1))


def locate_fault(recipe: Recipe) -> Any:
    """See `Pipeline.locate_fault`."""
    return recipe.input.locate_fault(recipe.decoding)


def _named_error(recipe: Recipe, error: BaseException) -> Exception | None:
    """The DecodeError naming the record behind a raw error of the built dataset (the
    SourceError naming a lost tf.data service worker), or None when the error is not the
    data's or no fault is found."""
    stalled = stall_message(error)
    if stalled is not None:
        return SourceError(stalled)
    if not from_input(error):
        return None
    fault = locate_fault(recipe)
    return None if fault is None else named_error(fault, error)


def assemble(recipe: Recipe, explain: bool = False) -> tuple[tf.data.Dataset, list[str]]:
    """The dataset of `recipe` and the label of each of its stages; to `explain`, a dataset whose
    tf.data service stages are left out (the dispatcher is not contacted), those of the
    recipes assembled inside it (a mixture's sources) too."""
    token = _EXPLAINING.set(explain or _EXPLAINING.get())
    try:
        return _assemble(recipe, _EXPLAINING.get())
    finally:
        _EXPLAINING.reset(token)


def _assemble(recipe: Recipe, explain: bool) -> tuple[tf.data.Dataset, list[str]]:
    _check_service(recipe)
    if recipe.echoing is not None and recipe.echoing.unit == "batch" and recipe.batch is None:
        raise ValueError('echo(unit="batch") needs a batch(): there are no batches to echo')
    assembly = Assembly()
    deterministic = recipe.options.deterministic
    det = _fixed_order(recipe) if deterministic is None else deterministic
    if recipe.start is not None and recipe.service is not None:
        raise ValueError(
            "start_at() and distribute() cannot be combined: with dynamic sharding the "
            "service decides which worker reads what, so the batches of a run cannot be "
            "replayed from a position"
        )
    if recipe.start is None:
        _one_pass(recipe, assembly, seed=recipe.seed, skip=0, det=det)
        if recipe.service is not None:
            _serve(recipe, assembly, service=recipe.service, det=det, explain=explain)
        batches = recipe.batches_per_epoch()
        if batches is not None and recipe.repeat == 0 and recipe.service is None:
            # Keras then shows the epoch's length and never stops on "input ran out of
            # data"; a dataset that does not hold what its metadata says fails instead.
            assembly.run(
                f"declare {batches} batches per epoch (from the example count)",
                lambda ds: ds.apply(tf.data.experimental.assert_cardinality(batches)),
            )
    else:
        _epochs(recipe, assembly, det)
    label = "AUTOTUNE" if recipe.prefetch == AUTOTUNE else str(recipe.prefetch)
    assembly.run(f"prefetch {label}", lambda ds: ds.prefetch(recipe.prefetch))
    assembly.run(f"options: deterministic={det}", lambda ds: _apply_options(recipe, ds, det))
    return assembly.dataset, assembly.labels


def _fixed_order(recipe: Recipe) -> bool:
    """Whether the order is the user's to rely on: the source's order (no shuffle), a
    seeded one or a resumed one. Only an unseeded shuffle lets parallel stages yield
    elements as they finish."""
    return not recipe.shuffle or recipe.seed is not None or recipe.start is not None


def _one_pass(recipe: Recipe, assembly: Assembly, seed: Any, skip: Any, det: bool) -> None:
    """Every stage up to `as_supervised`: one pass, or `repeat()`ed ones, less the first
    `skip` records (a resumed epoch; counted on the raw records, before any decoding)."""
    inp = recipe.input
    cached = recipe.cache is not None
    # Example echo needs examples, decoded before it (not in the calls of a map after it).
    echoes = recipe.echoing is not None and recipe.echoing.unit == "example"
    stages, by_record = inp.read(
        recipe.shard, seed, recipe.shuffle and not cached, det, start=assembly.position
    )
    assembly.run_all(stages)
    if recipe.shard is not None and by_record:
        num, index = recipe.shard
        if recipe.service is not None:
            raise ValueError(
                f"distribute(): {inp.describe()} cannot be split {num} ways on tf.data "
                f"service workers: it has fewer TFRecord files than the {num} shards or "
                f"training workers, and records dealt out after reading would be dealt out "
                f"on each service worker's share. Write at least {num} shards "
                "(write_tfrecords(num_shards=...)), or drop distribute()"
            )
        assembly.run(f"shard records {index} of {num}", lambda ds: ds.shard(num, index))
    if recipe.take is not None and not inp.decoded:
        assembly.run(f"take {recipe.take} examples", lambda ds: ds.take(recipe.take))
    if not cached:
        buffer = inp.record_buffer(recipe.buffer)
        _shuffle_and_repeat(recipe, assembly, buffer=buffer, what="records", seed=seed)
    if recipe.start is not None and not inp.positioned:
        assembly.run("skip the records of the batches before the start", lambda d: d.skip(skip))
    if inp.decoded:
        assembly.run_all(inp.loader(det))
        if recipe.take is not None:
            assembly.run(f"take {recipe.take} examples", lambda ds: ds.take(recipe.take))
    else:
        stays = not recipe.transforms and not (cached and recipe.shuffle) and not echoes
        size, drop = recipe.batch or (DEFAULT_BATCH, False)
        # On the service, each worker would drop the remainder of its own share.
        drop = drop and stays and recipe.service is None
        assembly.run(
            f"batch {size} records" + (" (drop remainder)" if drop else ""),
            lambda ds: ds.batch(size, drop_remainder=drop),
        )
        # Encoded images are decoded one example at a time after an unbatch, in a parallel
        # map (or the first map's calls): every core stays busy, where a `tf.map_fn` per
        # batch left the parallelism to the autotuner's guess per batch.
        defer = not cached and inp.defers_images()
        decoder = inp.decoder(recipe.decoding, defer_images=defer)
        assembly.run_all([decoder, *recipe.padding.stages])
        assembly.batched = True
        if defer:
            orient, label, decode = inp.image_decoders(recipe.decoding)
            assembly.run(*orient)
            assembly.unbatch()
            if recipe.transforms and recipe.transforms[0].takes_prepare() and not echoes:
                assembly.prepare = lambda pair: decode(*pair)
                name = recipe.transforms[0].name
                assembly.run(f"{label}, in the parallel calls of {name}", lambda ds: ds)
            else:
                assembly.run(
                    f"{label} (parallel, AUTOTUNE)",
                    lambda ds: ds.map(decode, num_parallel_calls=AUTOTUNE),
                )
    _transforms_and_cache(recipe, assembly)
    if recipe.batch is not None and not assembly.batched:
        size, drop = recipe.batch
        drop = drop and recipe.service is None
        ragged = lists.ragged_names(assembly.spec())
        assembly.run(
            f"batch {size}"
            + (" (drop remainder)" if drop else "")
            + (f" (lists as RaggedTensors: {', '.join(ragged)})" if ragged else ""),
            lambda ds: lists.batch(ds, size, drop_remainder=drop),
        )
    elif recipe.batch is None and assembly.batched and recipe.service is None:
        assembly.unbatch()
    if recipe.echoing is not None and recipe.echoing.unit == "batch":
        _echo(recipe, assembly)
    if recipe.supervised is not None:
        _supervise(recipe, assembly)


def _epochs(recipe: Recipe, assembly: Assembly, det: bool) -> None:
    """Epoch after epoch from `start_at`, each one pass in an order that is a pure function
    of (seed, epoch): each epoch is built afresh with its own seed, never reshuffled."""
    epoch, batch = recipe.start  # type: ignore[misc]
    last = _FOREVER if recipe.repeat is None else (recipe.repeat or epoch + 1)
    inner = Assembly()
    epoch_dataset = _epoch_maker(recipe, inner, det, (epoch, batch, 0))
    until = "forever" if last == _FOREVER else f"to epoch {last - 1}"
    assembly.run(
        f"for each epoch from {epoch} {until} (its seed from seed={recipe.seed} and the "
        f"epoch), starting at batch {batch} of epoch {epoch}:",
        lambda _: tf.data.Dataset.range(epoch, last).flat_map(epoch_dataset),
    )
    assembly.labels += [f"   {_SEED_TENSOR.sub('seed=of the epoch', x)}" for x in inner.labels]
    batches = recipe.batches_per_epoch()
    if batches is not None and last != _FOREVER:
        total = (last - epoch) * batches - batch
        assembly.run(
            f"declare {total} batches (from the example count)",
            lambda ds: ds.apply(tf.data.experimental.assert_cardinality(total)),
        )


def examples_from(recipe: Recipe, epoch: Any, record: Any) -> tf.data.Dataset:
    """The examples of `recipe` (unbatched, as dicts), from record `record` of epoch `epoch`
    (ints or scalar tensors) on, epoch after epoch forever, each in the order of (seed, epoch)
    as `start_at` orders it: a source of a mixture (`tfpipe.loaders.mixture`).

    """
    one = recipe.replace(batch=None, supervised=None, start=(0, 0))
    deterministic = recipe.options.deterministic
    det = _fixed_order(one) if deterministic is None else deterministic
    epoch_dataset = _epoch_maker(one, Assembly(), det, (epoch, 0, record))
    return tf.data.Dataset.range(epoch, _FOREVER).flat_map(epoch_dataset)


def count_records(recipe: Recipe) -> int:
    """The records `recipe` reads in one pass (less a `take()`), counted by reading their
    frames (nothing is parsed or decoded): for TFRecords whose metadata is missing.

    Examples:
        >>> count_records(tfpipe.Pipeline("out/train")._recipe)
        24
    """
    assembly = Assembly()
    stages, _ = recipe.input.read(None, None, False, True)
    assembly.run_all(stages)
    count = int(assembly.dataset.reduce(np.int64(0), lambda n, _: n + 1))
    return count if recipe.take is None else min(count, recipe.take)


def _epoch_maker(
    recipe: Recipe, inner: Assembly, det: bool, first: tuple[Any, int, Any]
) -> Callable[[tf.Tensor], tf.data.Dataset]:
    """The function `flat_map` turns each epoch number into its pass with: the records of
    that epoch in the order of (seed, epoch); of epoch `first[0]`, those of the batches
    before batch `first[1]` (echoed ones counted: see `_echo_start`) and `first[2]` more
    skipped; `inner` gets the labels of its stages."""
    epoch, batch, records = first
    one_epoch = recipe.replace(repeat=0)
    size = recipe.batch_size

    @tf.autograph.experimental.do_not_convert  # plain Python building the epoch's stages
    def epoch_dataset(number: tf.Tensor) -> tf.data.Dataset:
        # Only (seed, epoch) decide the order, not a global tf.random.set_seed: this
        # function's own graph is traced without the global seed.
        tf.compat.v1.get_default_graph().seed = None
        seed = None  # the source's order, without a shuffle
        if recipe.seed is not None:
            seed = tf.random.stateless_uniform(
                (), tf.stack([tf.constant(recipe.seed, tf.int64), number]), 0, 2**62, tf.int64
            )
        started = number == epoch
        first_batch = tf.where(started, tf.constant(batch, tf.int64), 0)
        skip = first_batch * size + tf.where(started, tf.cast(records, tf.int64), 0)
        inner.dataset, inner.labels, inner.batched = None, [], False
        inner.echo_start = None
        if recipe.echoing is not None:
            skip, inner.echo_start = _echo_start(recipe, number, first_batch)
        inner.position = (number, skip)  # a tfpipe.augment.Joint draws from it
        _one_pass(one_epoch, inner, seed=seed, skip=skip, det=det)
        if recipe.epoch_batches is not None:  # build_distributed: less the skipped ones
            inner.run(
                f"take the {recipe.epoch_batches} batches of the epoch every worker runs",
                lambda ds: ds.take(recipe.epoch_batches - first_batch),
            )
        return inner.dataset

    return epoch_dataset


def _shuffle_and_repeat(
    recipe: Recipe, assembly: Assembly, buffer: int, what: str, seed: Any = None
) -> None:
    if recipe.shuffle:
        seed = recipe.seed if seed is None else seed
        assembly.run(
            f"shuffle {what} (buffer {buffer}, seed={seed}, reshuffled each epoch)",
            lambda ds: shuffled(ds, buffer, seed),
        )
    if recipe.service is None and recipe.echoing is None:
        _repeat_stage(recipe, assembly)


def _repeat_stage(recipe: Recipe, assembly: Assembly) -> None:
    if recipe.repeat != 0:
        times = "forever" if recipe.repeat is None else f"{recipe.repeat} times"
        assembly.run(f"repeat {times}", lambda ds: ds.repeat(recipe.repeat))


def _check_service(recipe: Recipe) -> None:
    """Refuses what cannot run on tf.data service workers, naming it."""
    if recipe.service is None:
        return
    if recipe.input.mixture is not None:
        raise ValueError(
            "distribute(): a mixture is not sent to the tf.data service as a whole: call "
            "distribute() on each source Pipeline before Pipeline.sample_from (the workers "
            "then decode every source, and this process only picks the next source)"
        )
    refused = {
        "cache()": recipe.cache is not None,
        "take()": recipe.take is not None,
        "a keras.utils.PyDataset source": not recipe.input.servable,
        "Pipeline(truncate=True) (its counter lives in this process)": bool(recipe.padding.cut),
    }
    for what, present in refused.items():
        if present:
            raise ValueError(
                f"distribute(): {what} cannot run on tf.data service workers (each would "
                "apply it to its own share of the data, or cannot be sent to them): drop "
                "it, or drop distribute(). To split data between trainers, give their "
                "Pipelines the same distribute(..., job_name=...)"
            )


def _serve(
    recipe: Recipe, assembly: Assembly, service: DataService, det: bool, explain: bool
) -> None:
    """Sends the stages so far to the service; rebatches and repeats in this process.
    To `explain`, the dispatcher is not contacted (the plan is the same)."""
    assembly.run(
        f"options on the workers: deterministic={det}",
        lambda ds: _apply_options(recipe, ds, det),
    )
    splits = recipe.input.service_splits()
    if recipe.shard is not None:
        splits += f" (only those of shard {recipe.shard[1]} of {recipe.shard[0]})"
    assembly.run(service.describe(splits), (lambda ds: ds) if explain else service.apply)
    if recipe.batch is not None:
        size, drop = recipe.batch
        assembly.run(
            f"rebatch to {size}"
            + (" (drop remainder)" if drop else "")
            + " (each worker's share of an epoch ends in a short batch)",
            lambda ds: ds.rebatch(size, drop_remainder=drop),
        )
    elif assembly.batched:
        assembly.unbatch()
    _repeat_stage(recipe, assembly)


def _transforms_and_cache(recipe: Recipe, assembly: Assembly) -> None:
    """The maps and filters; the cache and an example echo before the first random map
    (each repeat of an example is then augmented afresh), else after the last."""
    pending = recipe.cache
    echo = recipe.echoing is not None and recipe.echoing.unit == "example"
    for position, transform in enumerate((*recipe.transforms, None)):
        random = (
            transform is not None
            and (pending is not None or echo)
            and transform.is_random(assembly.spec())
        )
        if pending is not None:
            path, asked_at = pending
            if position == asked_at or random:
                if position < asked_at:
                    warnings.warn(
                        f"cache() was asked for after the random {transform.name} "  # type: ignore[union-attr]
                        "(caching would freeze its output); the cache is placed before it",
                        TfpipeWarning,
                        stacklevel=6,  # the build() or explain() that placed it
                    )
                _place_cache(recipe, assembly, path)
                pending = None
        if echo and (transform is None or random):
            _echo(recipe, assembly)
            echo = False
        if transform is None:
            break
        assembly.unbatch()
        parallel = " (parallel, AUTOTUNE)" if transform.maps else ""
        prepare, assembly.prepare = assembly.prepare, None
        apply = functools.partial(
            transform.apply,
            prepare=prepare,
            position=assembly.position,
            seed=stage_seed(recipe.seed, position),
        )
        assembly.run(transform.name + parallel, apply)


def _echo(recipe: Recipe, assembly: Assembly) -> None:
    """The echo stage (see `tfpipe.loaders.echo`); from `start_at`, its windows' seeds
    continue from the first window read, and the echoed elements before the start are skipped;
    then `repeat()`, so that each pass is echoed on its own."""
    echo, window = recipe.echoing, recipe.echo_window
    assert echo is not None
    if echo.unit == "example":
        assembly.unbatch()
    start = assembly.echo_start
    seeds = window_seeds(
        stage_seed(recipe.seed, _ECHO_STAGE), None if start is None else start.windows
    )
    assembly.run(echo.describe(window), lambda ds: echoed(ds, echo, window, seeds))
    if start is not None:
        assembly.run(
            "skip the echoed elements before the start in its window",
            lambda ds: ds.skip(start.skip),
        )
        assembly.position = start.position
    if recipe.service is None:
        _repeat_stage(recipe, assembly)


def _echo_start(recipe: Recipe, number: tf.Tensor, first: tf.Tensor) -> tuple[Any, EchoStart]:
    """The raw records before the first window read of epoch `number` starting at batch
    `first`, and where the echo starts."""
    echo, window, size = recipe.echoing, recipe.echo_window, recipe.batch_size
    assert echo is not None
    by_batch = echo.unit == "batch"
    windows, rest = echo.resume(first if by_batch else first * size, window)
    records = windows * window * (size if by_batch else 1)
    return records, EchoStart((number, windows), rest, (number, first * size))


def _place_cache(recipe: Recipe, assembly: Assembly, path: str) -> None:
    assembly.run(f"cache ({path or 'memory'})", lambda ds: ds.cache(path))
    if recipe.shuffle and assembly.batched:
        known = recipe.input.num_examples
        size = (recipe.batch or (DEFAULT_BATCH, False))[0]
        batches = math.ceil(known / size) if known else _EXAMPLE_BUFFER
        assembly.run(
            f"shuffle cached batches (buffer {batches}, seed={recipe.seed})",
            lambda ds: shuffled(ds, batches, recipe.seed),
        )
    if recipe.shuffle:
        assembly.unbatch()
    buffer = recipe.buffer or min(recipe.input.num_examples or _EXAMPLE_BUFFER, _EXAMPLE_BUFFER)
    _shuffle_and_repeat(recipe, assembly, buffer, "decoded examples")


def _supervise(recipe: Recipe, assembly: Assembly) -> None:
    x, y = recipe.supervised  # type: ignore[misc]
    spec = assembly.spec()
    if not isinstance(spec, Mapping):
        raise SchemaError(
            "as_supervised: the examples are not a dict of named features "
            f"(got {type(spec).__name__}); a PyDataset already yields (x, y)"
        )
    check_known(x, y, available=sorted(spec), where="as_supervised", what="the examples")
    assembly.run(f"as_supervised x={x!r}, y={y!r}", lambda ds: ds.map(plain(selector(x, y))))


def _apply_options(
    recipe: Recipe, dataset: tf.data.Dataset, deterministic: bool
) -> tf.data.Dataset:
    options = tf.data.Options()
    options.deterministic = deterministic
    if recipe.options.ram_budget_mb is not None:
        options.autotune.ram_budget = recipe.options.ram_budget_mb << 20
    if recipe.options.threads is not None:
        options.threading.private_threadpool_size = recipe.options.threads
    return dataset.with_options(options)


class EchoStart(NamedTuple):
    """Where the echo of a `start_at` epoch starts."""

    windows: tuple[Any, Any]  # (epoch, index of the first window read)
    skip: Any  # echoed elements of that window before the start
    position: tuple[Any, Any]  # (epoch, index of the first example) of the maps after it


class Assembly:
    """The dataset under construction and the label of every stage applied to it."""

    def __init__(self) -> None:
        self.dataset: Any = None
        self.labels: list[str] = []
        self.batched = False
        self.prepare: Callable[[Any], Any] | None = None  # for the next map's calls
        self.position: tuple[Any, Any] | None = None  # (epoch, first record) after start_at
        self.echo_start: EchoStart | None = None

    def run(self, label: str, stage: Callable[[Any], tf.data.Dataset]) -> None:
        self.dataset = stage(self.dataset)
        self.labels.append(label)

    def run_all(self, stages: list[Stage]) -> None:
        for label, stage in stages:
            self.run(label, stage)

    def unbatch(self) -> None:
        if self.batched:
            self.run("unbatch", lambda ds: ds.unbatch())
            self.batched = False

    def spec(self) -> Any:
        return self.dataset.element_spec
