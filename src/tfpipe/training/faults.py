"""`tfpipe.named_errors`: TensorFlow's errors about damaged data, as errors naming the record.

It sits above the adapters (it searches the `Pipeline` of a path, a source or a `Feed` for the
fault) and below `fit`, `benchmark` and the command line, which all read their data inside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tfpipe.errors import SourceError, TfpipeError
from tfpipe.loaders.service import stall_message
from tfpipe.records.verification import RAW_ERRORS, from_input, named_error
from tfpipe.training.adapters import Feed, fault_search


@contextlib.contextmanager
def named_errors(*sources: Any) -> Iterator[None]:
    """Turns TensorFlow's errors about damaged data into a `DecodeError` naming the record.

    tf.data has no try/except inside the graph: a damaged shard fails a `model.fit` or a loop
    over a dataset with `DataLossError: corrupted record at 2111`, a record that is not a
    `tf.train.Example` with a `UnicodeDecodeError`, a bad image with `InvalidArgumentError`,
    none of which names a file. Inside this block such an error makes tfpipe read the sources
    again until the first fault (as `Pipeline.locate_fault` does), and raise a `DecodeError`
    naming the shard and record (or the image file), with TensorFlow's error as its cause.
    An error no source explains is raised unchanged. Nothing is read while all goes well.
    `tfpipe.fit`, `tfpipe.benchmark` and `tfpipe inspect` do this themselves.

    Examples:
        >>> ds = tfpipe.read_tfrecords("out/damaged").map(lambda ex: (ex["image"], ex["label"]))
        >>> with tfpipe.named_errors("out/damaged"):
        ...     history = model.fit(ds.batch(8), epochs=1, verbose=0)
        Traceback (most recent call last):
        ...
        tfpipe.errors.DecodeError: record 5 of out/damaged-00001-of-00002.tfrecord: ...

    Args:
        *sources: what the failing datasets read: `tfpipe.Pipeline`s, TFRecord paths (what
            `Pipeline` accepts), or tfpipe sources (`from_directory`, `from_dataframe`, ...).

    Raises:
        DecodeError: a source holds a damaged record or image; the message names it.
    """
    searches = [fault_search(source) for source in sources]
    try:
        yield
    except RAW_ERRORS as e:
        stalled = stall_message(e)
        if stalled is not None:  # a tf.data service worker lost (DataService.guard)
            raise SourceError(stalled) from e
        if not from_input(e):
            raise
        for search in searches:
            try:
                pipeline = search()
            except TfpipeError as found:  # e.g. the first record is damaged
                raise found from e
            fault = pipeline.locate_fault()
            if fault is not None:
                raise named_error(fault, e) from e
        raise


def naming(*feeds: Feed) -> contextlib.AbstractContextManager[None]:
    """`named_errors` over the Pipelines of `feeds` (other kinds cannot be searched)."""
    return named_errors(*(f.pipeline for f in feeds if f.pipeline is not None))
