"""The on-disk format: shard names, the metadata file, record frames and checks,
and TFDS folders."""
