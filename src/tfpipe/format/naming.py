"""The names of a dataset's files: its shards, their temporary names, its metadata file.

A dataset written to the prefix `out/train` is the shards `out/train-00000-of-00008.tfrecord`
... (`.tfrecord.gz` with gzip) and the metadata file `out/train.json`, written last. One
template (`SHARDS`) both writes these shard names and parses them back, so what a writer
names is what a reader recognizes; `TFDS_SHARDS` parses the default shard names of prepared
TensorFlow Datasets folders (`mnist-train.tfrecord-00000-of-00004`) the same way.

A file is written under a hidden temporary name first (`.<name>.tmp-<token>`), then renamed:
readers never read hidden names.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re

from tfpipe import fs
from tfpipe.format.compression import SUFFIXES

# What each variable of a template matches when a name is parsed.
_VARIABLES = {
    "PREFIX": r"(?P<prefix>.+)",
    "SHARD_X_OF_Y": r"(?P<index>\d{5,})-of-(?P<count>\d{5,})",
    "COMPRESSION": r"(?P<compression>\.gz|\.zz)?",
}
_UNNAMED = re.compile(r"\(\?P<\w+>")  # a named group's opening, made plain by `regex`
_COMPRESSION_OF_SUFFIX = {suffix: name for name, suffix in SUFFIXES.items()}


@dataclasses.dataclass(frozen=True)
class ShardName:
    """A shard file name, parsed: `train-00003-of-00008.tfrecord.gz` is shard 3 of 8 of the
    prefix `train`, gzip-compressed."""

    prefix: str
    index: int
    count: int
    compression: str | None = None


@dataclasses.dataclass(frozen=True)
class ShardTemplate:
    """A shard file name template over the variables `{PREFIX}` (the dataset's base name),
    `{SHARD_X_OF_Y}` (`00003-of-00008`) and `{COMPRESSION}` (the suffix, `.gz` for gzip).

    Examples:
        >>> from tfpipe.format.naming import SHARDS
        >>> SHARDS.name("train", 3, 8, "gzip")
        'train-00003-of-00008.tfrecord.gz'
        >>> SHARDS.parse("train-00003-of-00008.tfrecord.gz")
        ShardName(prefix='train', index=3, count=8, compression='gzip')
    """

    template: str

    def name(self, prefix: str, index: int, count: int, compression: str | None = None) -> str:
        """The file name of shard `index` of `count` of `prefix`."""
        return self.template.format(
            PREFIX=prefix,
            SHARD_X_OF_Y=f"{index:05d}-of-{count:05d}",
            COMPRESSION=SUFFIXES[compression],
        )

    def parse(self, name: str) -> ShardName | None:
        """The parts of the shard file name `name`; None when the template does not make it."""
        match = self._regex.fullmatch(name)
        if match is None:
            return None
        found = match.groupdict()
        compression = _COMPRESSION_OF_SUFFIX[found.get("compression") or ""]
        return ShardName(found["prefix"], int(found["index"]), int(found["count"]), compression)

    def regex(self, prefix: str) -> str:
        """A regular expression of the shard file names of `prefix` (any count and
        compression), without named groups (to be combined with others)."""
        return _UNNAMED.sub("(?:", self._pattern(PREFIX=re.escape(prefix)))

    def glob(self, prefix: str, count: int | None = None) -> str:
        """A glob of the shards of `prefix`, a glob itself (a path escaped by `fs.escape`):
        of any count, or of `count` shards."""
        shards = "*" if count is None else f"{count:05d}"
        return self.template.format(PREFIX=prefix, SHARD_X_OF_Y=f"*-of-{shards}", COMPRESSION="*")

    @functools.cached_property
    def _regex(self) -> re.Pattern[str]:
        return re.compile(self._pattern())

    def _pattern(self, **given: str) -> str:
        parts = re.split(r"(\{[A-Z_]+\})", self.template)
        variables = {**_VARIABLES, **given}
        return "".join(
            variables[part[1:-1]] if part.startswith("{") else re.escape(part) for part in parts
        )


SHARDS = ShardTemplate("{PREFIX}-{SHARD_X_OF_Y}.tfrecord{COMPRESSION}")
"""tfpipe's shard names: `train-00003-of-00008.tfrecord` (`.tfrecord.gz` with gzip)."""

TFDS_SHARDS = ShardTemplate("{PREFIX}.tfrecord-{SHARD_X_OF_Y}")
"""TFDS's default shard names: `mnist-train.tfrecord-00000-of-00004`, the prefix being
`<dataset>-<split>`."""


def metadata_path(prefix: str | os.PathLike[str]) -> fs.AnyPath:
    """The metadata file of a dataset prefix: `out/train` -> `out/train.json`."""
    return fs.path(metadata_name(os.fspath(prefix)))


def metadata_name(name: str) -> str:
    """The metadata file name of the dataset `name`: `train` -> `train.json`."""
    return f"{name}.json"


def temporary_name(name: str, token: str) -> str:
    """The hidden name the file `name` is written under by the writer `token`, before it is
    renamed: `.train-00003-of-00008.tfrecord.tmp-4242`."""
    return f".{name}.tmp-{token}"


def temporary_regex(names: str, token: str) -> str:
    """A regular expression of the temporary names of the files `names` (a regular
    expression) written by writers whose token matches `token` (another)."""
    return rf"\.{names}\.tmp-{token}"


TEMPORARY = re.compile(temporary_regex(".+", ".*"))
"""Any temporary name, of any file and writer."""
