"""The on-disk format: file names (`naming`), compression, the metadata file (`metadata`),
resolving what a path names (`resolution`), record frames, shard checks and TFDS folders."""

from tfpipe.format.metadata import DatasetInfo, ShardInfo, SkippedExample
from tfpipe.format.resolution import ResolvedData, resolve

__all__ = ["DatasetInfo", "ResolvedData", "ShardInfo", "SkippedExample", "resolve"]
