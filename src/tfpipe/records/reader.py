"""Reading TFRecord shards (tfpipe's or anyone's) as a `tf.data.Dataset` of example dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

# TensorFlow's iterator class (what `iter(dataset)` gives eagerly), subclassed by NamedIterator.
from tensorflow.python.data.ops.iterator_ops import OwnedIterator

from tfpipe import fs
from tfpipe.features.tracing import plain
from tfpipe.format.compression import tf_compression
from tfpipe.format.metadata import DatasetInfo
from tfpipe.format.resolution import PathArg, ResolvedData, resolve
from tfpipe.records import verification
from tfpipe.records.resolved import RAW_ERRORS, check_first_record, schema_for
from tfpipe.schema import Schema

Namer = Callable[[BaseException], Exception | None]
"""Gives the error naming the file and record behind a raw TensorFlow error, or None."""


class NamedDataset(tf.data.Dataset):
    """A `tf.data.Dataset` whose Python loop (`for batch in ds:`) raises errors that name the
    file and record of damaged data, where TensorFlow's own name neither.

    tf.data has no try/except inside the graph, so the naming happens where the loop gets
    the next element: a raw error (`UnicodeDecodeError`, `DataLossError`, ...) is given to
    `name`, and the error it returns is raised instead, with TensorFlow's as its cause. The
    variant (the graph) is the dataset's own: nothing is added to the reads. Only a loop over
    this very dataset is covered: a transformation (`.map`, `.batch`) gives a plain
    `tf.data.Dataset`, and a loop in a graph (`model.fit`) raises TensorFlow's errors, which
    `tfpipe.named_errors` and `tfpipe.fit` name.

    Examples:
        >>> ds = tfpipe.read_tfrecords("out/train")
        >>> isinstance(ds, tf.data.Dataset), type(ds).__name__
        (True, 'NamedDataset')
    """

    def __init__(self, dataset: tf.data.Dataset, name: Namer) -> None:
        self._dataset = dataset
        self._name = name
        # TensorFlow's own: how a tf.data dataset that wraps another passes its graph on.
        super().__init__(dataset._variant_tensor)

    def _inputs(self) -> list[tf.data.Dataset]:
        return [self._dataset]

    @property
    def element_spec(self) -> Any:
        """The spec of the elements, as the wrapped dataset's.

        Examples:
            >>> sorted(tfpipe.read_tfrecords("out/train").element_spec)
            ['image', 'label']
        """
        return self._dataset.element_spec

    def __iter__(self) -> Any:
        if not tf.executing_eagerly() or tf.inside_function():
            return super().__iter__()
        return NamedIterator(self, self._name)


class NamedIterator(OwnedIterator):
    """The iterator of a `NamedDataset`: TensorFlow's own iterator (so Keras reads it as a
    `tf.data.Iterator`, several steps per call, and ends an epoch of unknown length cleanly),
    whose raw errors are named when it is read eagerly (`next`, `get_next`).

    Examples:
        >>> iterator = iter(tfpipe.read_tfrecords("out/train"))
        >>> isinstance(iterator, tf.data.Iterator), sorted(next(iterator))
        (True, ['image', 'label'])
    """

    def __init__(self, dataset: tf.data.Dataset, name: Namer) -> None:
        super().__init__(dataset=dataset)
        self._tfpipe_namer = name

    def _next_internal(self) -> Any:
        if not tf.executing_eagerly():
            return super()._next_internal()
        try:
            return super()._next_internal()
        except RAW_ERRORS as e:
            if isinstance(e, tf.errors.OutOfRangeError):
                raise  # the end of the data, for __next__ and Keras
            named = self._tfpipe_namer(e)
            if named is None:
                raise
            raise named from e


def read_tfrecords(
    path: PathArg | ResolvedData, schema: Schema | None = None, split: str | None = None
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of decoded example dicts (unbatched), in the order written.

    Images come out as uint8 `(H, W, C)`, class labels as int64, texts as `tf.string`. The
    schema comes from `schema=`, else the metadata file of the tfpipe dataset the files belong
    to (named by its prefix, a folder, a glob or a list), else `infer_schema` (files written
    by plain TensorFlow scripts or TFDS). Gzip files are detected.
    The first record is checked against the schema right away; a mismatch raises a
    `DecodeError` naming the feature and the file.

    Nothing is read silently short. Where a metadata file (`<prefix>.json`) describes the
    files, even when they are named by a folder, glob or list, each file's size must be the
    one it declares (truncated, appended-to and undeclared zero-byte files fail at once), and
    the dataset has the declared length (`len(ds)`; an epoch that holds another count fails).
    Shards named `<prefix>-NNNNN-of-NNNNN` without metadata must all be there, and a
    warning says their counts, sizes and checksums cannot be checked; other files' counts are
    not checked.
    Temporary files of writes (`.name.tmp-<pid>`) are never read.

    A prepared TensorFlow Datasets folder (`~/tensorflow_datasets/mnist/3.0.1`) is read without
    TFDS: name a split (`split="train"`, or the path `.../mnist/3.0.1/mnist-train`); its
    features become tfpipe features (see the TFDS guide), and each shard must hold the records
    `dataset_info.json` lists. A folder (or its `dataset_info.json`) with several splits and
    no split given, or a glob matching shards of several splits, is an error listing them,
    never one merged dataset.

    Examples:
        >>> ds = tfpipe.read_tfrecords("out/train")
        >>> example = next(iter(ds))
        >>> example["image"].dtype, example["label"].dtype
        (tf.uint8, tf.int64)

    Args:
        path: a dataset prefix written by `write_tfrecords` ("out/train"), its metadata file,
            a TFRecord file, a folder of them, a glob, or a list of these; local, or a URL
            TensorFlow opens ("gs://bucket/train", see the filesystems guide).
        schema: the schema of the records. Defaults to the metadata's, or an inferred one.
        split: the split to read when `path` is a folder: a TFDS split ("train"), or the
            name of a tfpipe dataset prefix in the folder. Defaults to None (the folder's
            only TFDS split; every TFRecord file of another folder).

    Returns:
        The dataset; batch, shuffle and prefetch it as usual (or use tfpipe's loaders).

    Raises:
        DataNotFoundError: no metadata for a prefix (e.g. after an interrupted write), no
            TFRecord files at `path`, shards of a dataset are missing, or `path` is a URL
            whose scheme TensorFlow cannot open.
        DecodeError: the first record does not match the schema, or a file is not a TFRecord;
            in a loop over the returned dataset itself, a damaged record, a record that is not
            a `tf.train.Example`, a missing feature or another count than the metadata's
            (named by shard and record; after `.map`/`.batch`, see `tfpipe.named_errors`).
        SourceError: a file's size differs from its metadata's, or a file is empty; a TFDS
            folder holds several splits and none is named, or a glob matches several.
    """
    data = resolve(path, split=split)
    files, info, count = data.record_files("read_tfrecords"), data.info, data.num_examples
    schema = schema_for(data, schema)
    compression = data.compression
    check_first_record(schema, files)
    dataset = tf.data.TFRecordDataset(
        [str(f) for f in files], compression_type=tf_compression(compression)
    )
    dataset = dataset.map(plain(schema.parse), num_parallel_calls=tf.data.AUTOTUNE)
    if count is not None:
        # The metadata's count: len(dataset) works, and a count that differs fails the epoch.
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(count))
    return NamedDataset(dataset.prefetch(tf.data.AUTOTUNE), _namer(files, info, schema))


def _namer(files: list[fs.AnyPath], info: DatasetInfo | None, schema: Schema) -> Namer:
    """Names the shard and record behind a raw error of `read_tfrecords`' dataset by reading
    the files again to the first fault (`tfpipe.locate_fault`)."""

    def name(error: BaseException) -> Exception | None:
        if not verification.from_input(error):
            return None
        compression = info.compression if info is not None else None
        fault = verification.first_fault(files, info, compression, schema)
        return None if fault is None else verification.named_error(fault, error)

    return name
