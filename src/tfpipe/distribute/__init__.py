"""Training beyond one process: each worker's disjoint part of the data, built on
`tf.distribute` (`distribute_datasets_from_function` and its `InputContext`)."""

from tfpipe.distribute.sharding import DistributedFeed

__all__ = ["DistributedFeed"]
