"""The one place tfpipe touches private attributes of Keras objects (written against Keras 3.15).

Keras offers no public way to do these three things. Each is used where a public API fails or
hides what tfpipe needs; check them first when Keras is upgraded.

- `build_on` calls `Model._symbolic_build`, which builds a model, its loss, metrics and
  optimizer from one batch (Keras 3's `fit` does it from the first batch, reduced over the
  workers, which fails under several workers: keras-team/keras#20585).
- `workarounds_for_workers` sets `Model._maybe_symbolic_build` (that failing step) to nothing,
  and wraps `train_step`/`test_step`, for one `model.fit` under a multi-worker strategy.
- `profiles_a_batch` reads `TensorBoard._should_trace` (set by `profile_batch=...`).

`release_epoch_iterator` touches nothing private: it frees what Keras's `fit` leaves in a
reference cycle.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any

import keras
import tensorflow as tf

from tfpipe.training.backend import strategy_of

_PATCHED = ("_maybe_symbolic_build", "train_step", "test_step")
RELEASE_THREAD = "tfpipe-release-iterator"
RELEASE_WAIT_S = 1.0  # the collection itself takes ~0.2 s; a stalled delete goes on alone


def release_epoch_iterator() -> threading.Thread:
    """Frees the input's iterator that Keras's `fit` leaves behind when it stops before its
    data ends (`steps_per_epoch` over a repeated dataset, or `stop_training`); returns the
    thread that frees it.

    Its `EpochIterator` and the generator it keeps suspended hold each other, so the tf.data
    iterator (its threads, buffers and autotuning thread) lived on until Python's cycle
    collector ran, at any later point. A full collection (~0.2 s) frees it, in a thread of its
    own that this call waits for at most `RELEASE_WAIT_S`: deleting an autotuned iterator can
    block for up to a minute in TensorFlow (its autotuning thread, woken by the cancellation
    before the cancellation is marked done, sleeps out the rest of its optimization period: up
    to 60 s, 10.95 s in a measured case), and TensorFlow releases the GIL while it waits.
    """
    collector = threading.Thread(target=gc.collect, name=RELEASE_THREAD, daemon=True)
    collector.start()
    collector.join(RELEASE_WAIT_S)
    return collector


def build_on(model: keras.Model, batch: Any) -> None:
    """Builds the model, its loss, metrics and optimizer on one local batch, in its strategy
    (so that every variable is mirrored), in place of the probe that builds an unbuilt model.

    Under a multi-worker strategy, Keras 3's `fit` builds them from the first distributed
    batch by `strategy.reduce` of the whole (x, y) structure, which
    MultiWorkerMirroredStrategy cannot reduce ("Attempt to convert a value (PerReplica...)",
    keras-team/keras#20585): `fit` then skips that step for a model built here.
    """
    with strategy_of(model).scope():
        model._symbolic_build(data_batch=batch)


@contextlib.contextmanager
def workarounds_for_workers(model: keras.Model) -> Iterator[None]:
    """Works around two failures of Keras 3's `fit` under a multi-worker strategy, until the
    block ends (then the instance attributes set here are deleted).

    Keras builds the model from the first batch reduced over workers, which fails
    (keras-team/keras#20585): the model was built by `build_on`, so that step is skipped.
    It then averages each step's logs with `strategy.reduce("MEAN", value, axis=0)`, which
    fails on the scalar loss and metrics: each log is given a dimension of 1 here, so that
    the same reduction averages it over every replica.
    """
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None
    for name in ("train_step", "test_step"):
        step = getattr(model, name)

        def one_dimension(data: Any, step: Any = step) -> Any:
            return tf.nest.map_structure(
                lambda v: tf.reshape(v, [1]) if v.shape.rank == 0 else v, step(data)
            )

        setattr(model, name, one_dimension)
    model.train_function = model.test_function = None
    try:
        yield
    finally:
        for name in _PATCHED:
            delattr(model, name)
        model.train_function = model.test_function = None


def profiles_a_batch(callback: keras.callbacks.Callback) -> bool:
    """Whether a `TensorBoard` callback was given `profile_batch=...` (it acts on batches)."""
    return bool(getattr(callback, "_should_trace", False))
