"""Shard names: the template that writes a name parses it back, and nothing else."""

from __future__ import annotations

import re

import pytest

from tfpipe.format.naming import (
    SHARDS,
    TEMPORARY,
    TFDS_SHARDS,
    ShardName,
    metadata_path,
    temporary_name,
    temporary_regex,
)


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
@pytest.mark.parametrize(("prefix", "index", "count"), [("train", 3, 8), ("a-b.c", 0, 123456)])
def test_a_written_name_parses_back(
    prefix: str, index: int, count: int, compression: str | None
) -> None:
    name = SHARDS.name(prefix, index, count, compression)
    assert SHARDS.parse(name) == ShardName(prefix, index, count, compression)
    assert re.fullmatch(SHARDS.regex(prefix), name)
    assert not re.fullmatch(SHARDS.regex("other"), name)


def test_names_of_the_formats() -> None:
    assert SHARDS.name("train", 3, 8, "gzip") == "train-00003-of-00008.tfrecord.gz"
    assert TFDS_SHARDS.parse("mnist-train.tfrecord-00000-of-00004") == ShardName(
        "mnist-train", 0, 4
    )
    for other in ("train.tfrecord", "train-3-of-8.tfrecord", "mnist-train.tfrecord-00000-of-00004"):
        assert SHARDS.parse(other) is None
    assert TFDS_SHARDS.parse("train-00000-of-00004.tfrecord") is None


def test_globs_temporary_and_metadata_names() -> None:
    assert SHARDS.glob("out/train") == "out/train-*-of-*.tfrecord*"
    assert SHARDS.glob("out/train", 8) == "out/train-*-of-00008.tfrecord*"
    temporary = temporary_name(SHARDS.name("train", 1, 2), "4242")
    assert temporary == ".train-00001-of-00002.tfrecord.tmp-4242"
    assert TEMPORARY.fullmatch(temporary)
    assert re.fullmatch(temporary_regex(SHARDS.regex("train"), r"\d+"), temporary)
    assert str(metadata_path("out/train")) == "out/train.json"
