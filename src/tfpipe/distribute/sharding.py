"""Each worker's part of an epoch under a `tf.distribute` strategy, with equal steps everywhere.

    strategy ──▶ Layout(workers W, replicas per worker R)
    examples per worker (by file, by record or by slice of one permutation)
        ──▶ steps S = min over workers of examples // (global batch / W): the same everywhere
        ──▶ distribute_datasets_from_function: worker w's own dataset, batched per replica,
            S * R batches per epoch, repeated; the rest of each epoch is dropped and counted
        (resumed at global step s of an epoch: each worker skips its first s * R batches)

Every worker runs the same number of steps, so none waits forever at an all-reduce for a peer
that ran out of data; no example is read twice in an epoch. tf.data's auto-sharding is not
used: by file it gives workers different numbers of batches, by data every worker reads and
decodes everything.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from tfpipe.errors import SourceError, TfpipeWarning

WorkerDataset = Callable[[int, int, int, int], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How many workers train, and how many replicas (devices) each of them has."""

    num_workers: int
    replicas_per_worker: int

    @classmethod
    def of(cls, strategy: tf.distribute.Strategy) -> Layout:
        """The layout of `strategy` (one worker, one replica without a strategy)."""
        if strategy.num_replicas_in_sync == 1:  # the default strategy has no worker_devices
            return cls(1, 1)
        local = len(strategy.extended.worker_devices)
        return cls(strategy.num_replicas_in_sync // local, local)

    @property
    def replicas(self) -> int:
        return self.num_workers * self.replicas_per_worker

    def per_replica(self, global_batch: int) -> int:
        """The batch each replica gets of a global batch; it must divide evenly."""
        if global_batch % self.replicas:
            raise ValueError(
                f"batch_size={global_batch} is the global batch of one step, split over "
                f"{self.num_workers} worker(s) x {self.replicas_per_worker} replica(s) = "
                f"{self.replicas}: it must be a multiple of {self.replicas}. Received: "
                f"batch_size={global_batch}; use e.g. "
                f"{max(1, global_batch // self.replicas) * self.replicas}"
            )
        return global_batch // self.replicas


@dataclasses.dataclass(frozen=True)
class DistributedFeed:
    """A `tf.distribute.DistributedDataset` that gives every worker the same number of steps.

    Every worker reads its own disjoint part of the data. An epoch is `steps_per_epoch` global
    batches of `global_batch_size` examples, no example twice; the `dropped_per_epoch` examples
    that do not fill a whole global batch on every worker are left out of each epoch (other
    ones every epoch when the input shuffles), and a `TfpipeWarning` says how many. The dataset
    repeats forever: pass `steps_per_epoch` to `model.fit`.

    Examples:
        >>> strategy = tf.distribute.MirroredStrategy(["/cpu:0"])  # or MultiWorkerMirrored...
        >>> with strategy.scope():
        ...     model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Flatten(),
        ...                               keras.layers.Dense(3)])
        ...     model.compile("adam", keras.losses.SparseCategoricalCrossentropy(True))
        >>> data = tfpipe.Pipeline("out/train").shuffle(seed=0).batch(8).as_supervised(
        ...     "image", "label").build_distributed(strategy)
        >>> data.steps_per_epoch, data.global_batch_size, data.dropped_per_epoch
        (3, 8, 0)
        >>> history = model.fit(data.dataset, steps_per_epoch=data.steps_per_epoch, epochs=2,
        ...                     verbose=0)

    Attributes:
        dataset: the distributed dataset, per-replica batches, repeated forever.
        steps_per_epoch: global steps in one epoch, the same on every worker.
        global_batch_size: examples in one step over all workers and replicas.
        num_workers: worker processes training together.
        replicas_per_worker: replicas (devices) of each worker.
        examples_per_epoch: examples used in one epoch over all workers.
        dropped_per_epoch: examples left out of each epoch.
        shard_by: how the data is split: "file", "record", "source" (each source of a
            mixture dealt out in proportion) or "permutation" (a slice of the
            same shuffled order on every worker).
    """

    dataset: Any
    steps_per_epoch: int
    global_batch_size: int
    num_workers: int
    replicas_per_worker: int
    examples_per_epoch: int
    dropped_per_epoch: int
    shard_by: str

    @property
    def per_replica_batch_size(self) -> int:
        """Examples each replica gets in one step.

        Examples:
            >>> strategy = tf.distribute.MirroredStrategy(["/cpu:0"])  # 1 replica
            >>> data = tfpipe.Pipeline("out/train").batch(8).build_distributed(strategy)
            >>> data.global_batch_size, data.per_replica_batch_size
            (8, 8)
        """
        return self.global_batch_size // (self.num_workers * self.replicas_per_worker)


def distribute(
    strategy: tf.distribute.Strategy,
    worker_dataset: WorkerDataset,
    worker_examples: Sequence[int],
    global_batch: int,
    shard_by: str,
    what: str,
    start: int = 0,
) -> DistributedFeed:
    """Sizes the epoch so that every worker runs the same steps, then distributes.

    Args:
        strategy: the `tf.distribute` strategy the model was built under.
        worker_dataset: `(worker, per_replica_batch, batches, skip)` -> that worker's
            dataset, repeated forever: every epoch exactly `batches` batches of
            `per_replica_batch` examples, none read twice in the epoch, less the first `skip`
            batches of its first epoch (not read: a resumed run).
        worker_examples: the examples each worker can read in one epoch.
        global_batch: examples of one step over every replica.
        shard_by: "file", "record" or "permutation", for the result and the messages.
        what: the input, for the messages (e.g. "Pipeline('out/train')").
        start: the global step of the first epoch to start at (`start_at(epoch, batch)`
            counts global batches). Defaults to 0.
    """
    layout = Layout.of(strategy)
    per_replica = layout.per_replica(global_batch)
    per_worker = per_replica * layout.replicas_per_worker
    steps = min(count // per_worker for count in worker_examples)
    total = sum(worker_examples)
    if steps == 0:
        worker = min(range(len(worker_examples)), key=worker_examples.__getitem__)
        raise SourceError(
            f"{what}: worker {worker} gets {worker_examples[worker]} example(s) by {shard_by}, "
            f"fewer than its share of one step ({per_worker} of batch_size={global_batch}): "
            "no worker could train a single step. Lower the batch size, or write more shards "
            "(or fewer workers)"
        )
    if start >= steps:
        raise ValueError(
            f"{what}: start_at(batch={start}) is past the last step of an epoch on "
            f"{layout.num_workers} worker(s): an epoch is {steps} steps of {global_batch} "
            f"examples (split by {shard_by}; examples per worker {list(worker_examples)}). "
            f"Pass a batch below {steps}, or start at the next epoch with batch=0"
        )
    used = steps * global_batch
    if used < total:
        warnings.warn(
            f"{what}: {total - used} of {total} examples are left out of each epoch on "
            f"{layout.num_workers} worker(s) x {layout.replicas_per_worker} replica(s), so that "
            f"every worker runs the same {steps} steps of {global_batch} examples (split by "
            f"{shard_by}; examples per worker {list(worker_examples)}); a shuffled input leaves "
            "out other examples every epoch",
            TfpipeWarning,
            stacklevel=3,
        )
    batches = steps * layout.replicas_per_worker

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        if context.num_input_pipelines != layout.num_workers:
            raise ValueError(
                f"the strategy has {context.num_input_pipelines} input pipelines, expected one "
                f"per worker ({layout.num_workers})"
            )
        skip = start * layout.replicas_per_worker
        return worker_dataset(context.input_pipeline_id, per_replica, batches, skip)

    return DistributedFeed(
        strategy.distribute_datasets_from_function(dataset_fn),
        steps_per_epoch=steps,
        global_batch_size=global_batch,
        num_workers=layout.num_workers,
        replicas_per_worker=layout.replicas_per_worker,
        examples_per_epoch=used,
        dropped_per_epoch=total - used,
        shard_by=shard_by,
    )


def record_split(count: int, num_workers: int) -> list[int]:
    """Examples of each worker when records are dealt out in turn (`Dataset.shard`)."""
    return [len(range(worker, count, num_workers)) for worker in range(num_workers)]


def file_split(file_examples: Sequence[int], num_workers: int) -> list[int]:
    """Examples of each worker when files are dealt out in turn (`Dataset.shard`)."""
    return [sum(file_examples[worker::num_workers]) for worker in range(num_workers)]
