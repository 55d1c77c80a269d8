"""The on-disk format: file names (`naming`), compression, the metadata file (`metadata`),
resolving what a path names (`lookup`), record frames, shard checks and TFDS folders."""

from tfpipe.format.lookup import ResolvedData, resolve
from tfpipe.format.metadata import DatasetInfo, ShardInfo, SkippedExample

__all__ = ["DatasetInfo", "ResolvedData", "ShardInfo", "SkippedExample", "resolve"]
