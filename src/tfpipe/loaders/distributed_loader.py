"""A `SequenceLoader` under a `tf.distribute` strategy: each worker loads its slice of each step.

    epoch e ──loader.order(e), the same on every worker (same seed)──▶ global batch s
        = order[s * B : (s + 1) * B] ──worker w's slice──▶ order[s * B + w * B/W : ... + B/W]
        ──loaded in `workers` threads (interleaved generators)──▶ split into R replica batches

Steps are numbered across epochs (step k is step k % S of epoch k // S), so the loader keeps
no state between batches and its threads need no lock. A loader from `start_at(epoch, batch)`
numbers them from `batch` of `epoch`: the position counts global steps.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe.distribute.sharding import DistributedFeed, Layout, distribute, record_split
from tfpipe.errors import TfpipeWarning
from tfpipe.loaders.loader_options import LoaderOptions


@dataclasses.dataclass(frozen=True)
class DistributableLoader:
    """What `distribute_loader` needs of a `SequenceLoader`.

    Attributes:
        options: the loader's options.
        size: the examples of its source.
        first_epoch: the epoch it starts in.
        first_batch: the batch of that epoch it starts at (`start_at`).
        order: epoch -> the example indices of that epoch, in batch order.
        load: (example indices, epoch) -> their batch, as `loader[i]` gives it.
        signature: the `tf.TensorSpec`s of one batch (batch dimension None).
    """

    options: LoaderOptions
    size: int
    first_epoch: int
    first_batch: int
    order: Callable[[int], np.ndarray]
    load: Callable[[np.ndarray, int], tuple[Any, ...]]
    signature: Any


def distribute_loader(
    loader: DistributableLoader, strategy: tf.distribute.Strategy
) -> DistributedFeed:
    """`SequenceLoader.build_distributed(strategy)`: see there."""
    options = loader.options
    layout = Layout.of(strategy)
    if options.shuffle and options.seed is None and layout.num_workers > 1:
        raise ValueError(
            "SequenceLoader.build_distributed: with shuffle=True every worker must draw the "
            "same order of each epoch, but seed=None draws one per process, and workers would "
            "read overlapping examples. Pass seed=<int> (the same on every worker). "
            "Received: seed=None"
        )
    if options.use_multiprocessing:
        warnings.warn(
            "use_multiprocessing=True does not apply under a tf.distribute strategy: each "
            f"worker loads its batches in {options.workers} thread(s)",
            TfpipeWarning,
            stacklevel=3,
        )
    global_batch = options.batch_size
    per_worker = global_batch // layout.num_workers
    first_epoch = loader.first_epoch

    def worker_dataset(worker: int, per_replica: int, batches: int, skip: int) -> tf.data.Dataset:
        steps = batches // layout.replicas_per_worker

        def load(step: Any) -> Iterator[Any]:
            epoch, position = divmod(int(step), steps)
            start = position * global_batch + worker * per_worker
            order = loader.order(first_epoch + epoch)
            yield loader.load(order[start : start + per_worker], first_epoch + epoch)

        def one(step: tf.Tensor) -> tf.data.Dataset:
            return tf.data.Dataset.from_generator(
                load, args=(step,), output_signature=loader.signature
            )

        return (
            tf.data.Dataset.counter(skip // layout.replicas_per_worker)  # steps, numbered on
            .interleave(
                one,
                cycle_length=options.workers,
                num_parallel_calls=options.workers,
                deterministic=True,
            )
            .unbatch()
            .batch(per_replica, drop_remainder=True)
            .prefetch(tf.data.AUTOTUNE)
        )

    return distribute(
        strategy,
        worker_dataset=worker_dataset,
        worker_examples=record_split(loader.size, layout.num_workers),
        global_batch=global_batch,
        shard_by="permutation",
        what="SequenceLoader",
        start=loader.first_batch,
    )
