"""Which TFRecord files a path names (a dataset prefix, a folder, a glob or a list), the
metadata they belong to, and what TensorFlow raises while reading them."""

from __future__ import annotations

import glob
import os

import tensorflow as tf

from tfpipe import fs
from tfpipe.errors import DataNotFoundError
from tfpipe.format.compression import compression_of
from tfpipe.format.lookup import locate_files, names_dataset
from tfpipe.format.metadata import DatasetInfo
from tfpipe.format.naming import SHARDS, metadata_path
from tfpipe.format.shards import check_sizes, declared_examples, one_dataset
from tfpipe.records.infer import PathArg, records
from tfpipe.schema import Schema

RAW_ERRORS = (tf.errors.OpError, UnicodeDecodeError)
"""What TensorFlow raises for damaged data while a `tf.data` pipeline is iterated."""


def _is_prefix(text: str) -> bool:
    """A path that names no file, folder or glob: only a dataset prefix with metadata fits."""
    return not (fs.path(text).exists() or glob.has_magic(text) or text.endswith(".json"))


def locate(
    path: PathArg, argument: str = "path"
) -> tuple[list[fs.AnyPath], DatasetInfo | None, int | None]:
    """The TFRecord files at `path`, the metadata of the one dataset they belong to (whether
    named by its prefix, a folder, a glob or a list), and the number of examples their
    metadata declares (None when a file has no metadata).

    Each file's size is checked against its metadata (see `tfpipe.format.shards.check_sizes`); a
    URL whose scheme TensorFlow cannot open fails first, naming `argument`.
    """
    fs.check_paths(path, argument)
    files, info = _files_at(path)
    declared = check_sizes(files, info)
    return files, info or one_dataset(files, declared), declared_examples(files, declared)


def _files_at(path: PathArg) -> tuple[list[fs.AnyPath], DatasetInfo | None]:
    if not isinstance(path, str | os.PathLike):
        return locate_files(list(path))
    text = os.fspath(path)
    if _is_prefix(text) and not names_dataset(text):
        shards = fs.glob(SHARDS.glob(fs.escape(text)))
        hint = (
            f"; {len(shards)} shard file(s) exist without it: an interrupted or unfinished "
            f"write? Write again, or read them anyway with read_tfrecords('{text}-*', schema=...)"
            if shards
            else ""
        )
        raise DataNotFoundError(
            f"path {text!r} is not a file, folder or glob, and the dataset metadata file "
            f"{str(metadata_path(text))!r} does not exist{hint}"
        )
    return locate_files(text)


def common_compression(files: list[fs.AnyPath]) -> str | None:
    """The one compression all `files` share; raises when they mix compressions."""
    kinds = {f: compression_of(f) for f in files}
    if len(set(kinds.values())) > 1:
        by_kind = {
            str(kind): next(f.name for f, k in kinds.items() if k == kind)
            for kind in kinds.values()
        }
        raise ValueError(
            f"the files mix compressions (one file of each: {by_kind}); read them apart"
        )
    return next(iter(kinds.values()))


def check_first_record(schema: Schema, files: list[fs.AnyPath]) -> int:
    """Checks the first record against the schema, so a mismatch fails early and clearly;
    returns its size in bytes."""
    for file, index, record in records(files, limit=1):
        schema.stored(record, where=f"record {index} of {file.name}")
        return len(record)
    return 0
