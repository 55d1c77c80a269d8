"""What number each worker of a `tf.distribute` strategy holds, known to all of them.

    worker w: value v_w ──all_gather over every replica──▶ [v_0, ..., v_{W-1}] on every worker

Used where workers must start from the same state (a restored backup): a worker that read
something else would otherwise train from another position, with another number of steps,
and leave its peers waiting at an all-reduce.
"""

from __future__ import annotations

import tensorflow as tf

from tfpipe.distribute.sharding import Layout


def gather(strategy: tf.distribute.Strategy, value: int) -> list[int]:
    """The `value` of every worker of `strategy`, in worker order; every worker must call it
    (it is a collective operation).

    Examples:
        >>> steps = gather(strategy, step)  # on every worker
        >>> len(set(steps)) == 1  # all workers passed the same step
        True
    """
    mine = tf.constant([value], tf.int64)

    def replica() -> tf.Tensor:
        return tf.distribute.get_replica_context().all_gather(mine, axis=0)

    gathered = tf.function(lambda: strategy.run(replica))()
    values = strategy.experimental_local_results(gathered)[0].numpy().tolist()
    return [int(v) for v in values[:: Layout.of(strategy).replicas_per_worker]]
