"""What a read of resolved TFRecord files needs beyond their paths: the schema to read them
with, a check of the first record, and what TensorFlow raises while reading them."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfpipe import fs
from tfpipe.errors import SourceError
from tfpipe.format.compression import compression_of
from tfpipe.format.frames import first_record
from tfpipe.format.resolution import PathArg, ResolvedData, resolve
from tfpipe.records.infer import infer_schema, records
from tfpipe.schema import Schema
from tfpipe.sources import SourceBase, from_directory, from_tfrecords

RAW_ERRORS = (tf.errors.OpError, UnicodeDecodeError)
"""What TensorFlow raises for damaged data while a `tf.data` pipeline is iterated."""


def schema_for(data: ResolvedData, schema: Any = None) -> Schema:
    """The schema to read resolved records with: `schema` when given (its class names matched
    with every metadata file's by name), else the metadata's, else one inferred from the
    first records (as `tfpipe.infer_schema` infers it).

    Raises:
        SchemaError: `schema` is not a `Schema`, or its class names differ from the stored
            ones; no schema can be inferred.
    """
    known = data.schema(schema)
    return known if known is not None else infer_schema(data)


def random_access(
    path: PathArg | ResolvedData, schema: Any = None, *, argument: str = "source"
) -> SourceBase:
    """A random-access source over what a path names (see `tfpipe.format.resolution.resolve`): a
    folder of class folders of images as `tfpipe.from_directory` reads it, TFRecords as
    `tfpipe.from_tfrecords` reads them, with `schema_for`'s schema (given, the metadata's, or
    inferred).

    Examples:
        >>> len(random_access("out/train")), len(random_access("images"))
        (24, 24)
    """
    data = resolve(path, argument=argument)
    if data.image_folder is None:
        return from_tfrecords(data, schema_for(data, schema))
    if schema is not None:
        raise ValueError(
            f"schema= describes TFRecords, but {argument}={data.origin!r} is a folder of class "
            "folders of images: read it with tfpipe.from_directory(..., image_shape=...) instead"
        )
    return from_directory(data.image_folder)


def check_first_record(schema: Schema, files: list[fs.AnyPath]) -> int:
    """Checks the first record against the schema, so a mismatch fails early and clearly;
    returns its size in bytes.

    The record is read in Python (`frames.first_record`); a file it cannot read is read
    again with TensorFlow's reader, whose error names the fault as every reader names it.
    """
    for file in files:
        try:
            record = first_record(file, compression_of(file))
        except SourceError:
            break
        if record is not None:
            schema.stored(record, where=f"record 0 of {file.name}")
            return len(record)
    for file, index, record in records(files, limit=1):
        schema.stored(record, where=f"record {index} of {file.name}")
        return len(record)
    return 0
