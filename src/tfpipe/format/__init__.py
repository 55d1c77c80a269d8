"""The on-disk format: file names (`naming`), compression, the metadata file (`metadata`),
finding a dataset's files (`lookup`), record frames, shard checks and TFDS folders."""
