"""What each worker of a `tf.distribute` strategy holds, known to all of them.

    worker w: value v_w ──all_gather over every replica──▶ [v_0, ..., v_{W-1}] on every worker

Used where workers must start from the same state (a restored backup): a worker that read
something else, or failed to read it, would otherwise train from another position, with
another number of steps, or not at all, and leave its peers waiting at an all-reduce.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from tfpipe.distribute.sharding import Layout

TEXT_BYTES = 2000
"""A text passed to `gather_text` is cut to this many bytes of UTF-8."""


def gather(strategy: tf.distribute.Strategy, value: int) -> list[int]:
    """The `value` of every worker of `strategy`, in worker order; every worker must call it
    (it is a collective operation).

    Examples:
        >>> steps = gather(strategy, step)  # on every worker
        >>> len(set(steps)) == 1  # all workers passed the same step
        True
    """
    return [row[0] for row in _gather_rows(strategy, [value])]


def gather_text(strategy: tf.distribute.Strategy, text: str) -> list[str]:
    """The `text` of every worker of `strategy` (each cut to `TEXT_BYTES` bytes), in worker
    order; every worker must call it (it is a collective operation).

    Examples:
        >>> problems = gather_text(strategy, "" if loaded else str(error))  # on every worker
        >>> [(w, p) for w, p in enumerate(problems) if p]  # the workers that failed
        [(1, 'OSError: ...')]
    """
    data = text.encode()[:TEXT_BYTES]
    rows = _gather_rows(strategy, [len(data), *data, *[0] * (TEXT_BYTES - len(data))])
    return [bytes(row[1 : 1 + row[0]]).decode(errors="replace") for row in rows]


def settle(strategy: tf.distribute.Strategy) -> None:
    """Waits, before the workers raise on what a gather showed, until every worker holds it. A
    worker that raises and exits right after a gather can close its sockets while a peer still
    fetches its share of it; the peer then fails with UnavailableError ("Socket closed") instead
    of the error they share. A failure of this wait itself is ignored: by then every worker
    holds the gathered values. Every worker must call it (a collective operation).

    Examples:
        >>> if len(set(steps)) > 1:  # on every worker: the same values, the same decision
        ...     settle(strategy)
        ...     raise SourceError("the workers found different backups")
    """
    with contextlib.suppress(tf.errors.OpError):  # a peer that left had the values already
        _gather_rows(strategy, [0])


def _gather_rows(strategy: tf.distribute.Strategy, row: list[int]) -> list[list[int]]:
    """`row` (the same length on every worker) of every worker, in worker order."""
    mine = tf.constant([row], tf.int64)

    def replica() -> tf.Tensor:
        return tf.distribute.get_replica_context().all_gather(mine, axis=0)

    gathered = tf.function(lambda: strategy.run(replica))()
    rows = strategy.experimental_local_results(gathered)[0].numpy().tolist()
    return [[int(v) for v in r] for r in rows[:: Layout.of(strategy).replicas_per_worker]]
