"""A `Pipeline` under a `tf.distribute` strategy: each worker builds its own part.

Recipe ──check_distributable──▶ worker_examples: by file when every worker gets one (their
    counts from the metadata), else by record ──worker_datasets──▶ worker w: the recipe
    with shard(W, w), batch(per replica, drop remainder), cut to the steps every worker
    runs (from `start_at`: each epoch built from (seed, epoch), then cut)

On the tf.data service, each worker's part is a job of its own (a shared `job_name` gets the
worker's index), and its files are dealt out among the service workers.

With `echo()`, each worker echoes its own share: the steps of an epoch follow its echoed
examples (`factor` times its examples; for batch echo `factor` times its whole batches).
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe.distribute.sharding import (
    DistributedFeed,
    Layout,
    WorkerDataset,
    distribute,
    file_split,
    record_split,
)
from tfpipe.errors import SourceError
from tfpipe.loaders.assembly import build
from tfpipe.loaders.recipe import Recipe


def distributed(recipe: Recipe, strategy: tf.distribute.Strategy) -> DistributedFeed:
    """See `Pipeline.build_distributed`."""
    check_distributable(recipe)
    layout = Layout.of(strategy)
    examples, by = worker_examples(recipe, layout.num_workers)
    echo = recipe.echoing
    if echo is not None and echo.unit == "batch":
        per_replica = layout.per_replica(recipe.batch_size)
        examples = [echo.factor * (n // per_replica) * per_replica for n in examples]
    elif echo is not None:
        examples = [echo.factor * n for n in examples]
    return distribute(
        strategy,
        worker_dataset=worker_datasets(recipe, layout.num_workers),
        worker_examples=examples,
        global_batch=recipe.batch_size,
        shard_by=by,
        what=f"Pipeline({recipe.name})",
        start=0 if recipe.start is None else recipe.start[1],
    )


def check_distributable(recipe: Recipe) -> None:
    """Refuses, naming it, what would leave workers without a batch or with unequal epochs."""
    if recipe.batch is None:
        raise ValueError(
            "build_distributed: call batch(global_batch_size) first; the batch is split "
            "over every worker and replica"
        )
    unequal = [
        name
        for name, given in (
            ("filter()", recipe.filtered),
            ("take()", recipe.take is not None),
            ("shard()", recipe.shard is not None),
            (f"repeat({recipe.repeat})", recipe.repeat not in (0, None)),
        )
        if given
    ]
    if unequal:
        raise ValueError(
            f"build_distributed: {unequal[0]} cannot apply; each worker must know how many "
            "examples it reads to run as many steps as the others (the distributed dataset "
            "repeats by itself, and the strategy shards it). Filter when writing the records"
        )


def worker_examples(recipe: Recipe, workers: int) -> tuple[list[int], str]:
    """The examples each of `workers` reads, and whether files or records are split."""
    inp = recipe.input
    dealt = inp.worker_counts(workers)  # a mixture deals out each of its sources
    if dealt is not None:
        return dealt, "source"
    counts = inp.declared_counts()  # one per TFRecord file, -1 where unknown
    if workers > 1 and len(counts) >= workers:
        if -1 not in counts:
            return file_split(counts, workers), "file"
    elif inp.num_examples is not None:
        return record_split(inp.num_examples, workers), "record"
    raise SourceError(
        f"Pipeline({recipe.name}): the number of examples each worker reads is unknown "
        "(TFRecords without tfpipe metadata, or a PyDataset), so workers could run unequal "
        "epochs and wait forever for each other. Write the records with "
        "tfpipe.write_tfrecords (its metadata counts each shard), or use a SequenceLoader"
    )


def worker_datasets(recipe: Recipe, workers: int) -> WorkerDataset:
    """The dataset of each worker, as `tfpipe.distribute.sharding.distribute` asks for it."""
    shard = None if workers == 1 else workers

    def worker_dataset(worker: int, per_replica: int, batches: int, skip: int) -> tf.data.Dataset:
        part = (recipe if shard is None else recipe.part(shard, worker)).replace(
            batch=(per_replica, True), repeat=0
        )
        if recipe.start is None:
            return build(part).take(batches).repeat()
        start = (recipe.start[0], skip)  # each epoch built from (seed, epoch), then cut
        return build(part.replace(repeat=None, start=start, epoch_batches=batches))

    return worker_dataset
