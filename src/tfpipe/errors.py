"""The exceptions and warnings tfpipe raises.

Every error derives from `TfpipeError`, and from the built-in exception a caller would expect
(`ValueError` for bad values, `FileNotFoundError` for missing paths), so both
`except tfpipe.errors.TfpipeError` and `except ValueError` work.
"""

from __future__ import annotations

import re

_TF_PREFIX = re.compile(r"^\{\{function_node [^}]*\}\}\s*")


class TfpipeError(Exception):
    """Base class of every error tfpipe raises.

    Examples:
        >>> from tfpipe.errors import TfpipeError
        >>> try:
        ...     tfpipe.read_tfrecords("no/such/prefix")
        ... except TfpipeError as error:
        ...     print(type(error).__name__)
        DataNotFoundError
    """


class SchemaError(TfpipeError, ValueError):
    """A schema or feature is declared wrongly, or does not match the data.

    Examples:
        >>> tfpipe.Image(shape=(32, 32, 2))
        Traceback (most recent call last):
        ...
        tfpipe.errors.SchemaError: Image.shape must be (height, width, channels) with 1, 3 or
        4 channels. Received: shape=(32, 32, 2)
    """


class EncodeError(TfpipeError, ValueError):
    """An example could not be encoded (unreadable or corrupt image, decompression bomb, wrong
    dtype, unknown class name).

    Examples:
        >>> schema = tfpipe.Schema({"label": tfpipe.ClassLabel(names=["cat", "dog"])})
        >>> schema.encode({"label": "bird"}, where="row 3")
        Traceback (most recent call last):
        ...
        tfpipe.errors.EncodeError: label: unknown class name 'bird'; expected one of
        ['cat', 'dog'] in row 3
    """


class DecodeError(TfpipeError, ValueError):
    """A stored record or an image file could not be decoded (or is a decompression bomb).

    Examples:
        >>> schema = tfpipe.Schema({"label": tfpipe.ClassLabel(names=["cat", "dog"])})
        >>> schema.decode(b"not a record", where="record 7")
        Traceback (most recent call last):
        ...
        tfpipe.errors.DecodeError: record 7 is not a serialized tf.train.Example: ...
    """


class SourceError(TfpipeError, ValueError):
    """A data source is empty, misses a column, or cannot be indexed.

    Examples:
        >>> tfpipe.from_arrays({"x": np.zeros(3), "y": np.zeros(4)})
        Traceback (most recent call last):
        ...
        tfpipe.errors.SourceError: arrays must share their first dimension, got lengths
        {'x': 3, 'y': 4}
    """


class DataNotFoundError(TfpipeError, FileNotFoundError):
    """A path, shard or metadata file does not exist.

    Examples:
        >>> try:
        ...     tfpipe.from_directory("no-such-folder")
        ... except FileNotFoundError as error:  # a DataNotFoundError is one
        ...     print(error)
        root: folder 'no-such-folder' does not exist
    """


class TfpipeWarning(UserWarning):
    """Warnings tfpipe emits: skipped records, ignored arguments, partial caches.

    Examples:
        >>> import warnings
        >>> source = tfpipe.from_arrays({"x": np.zeros((4, 2))})
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     parts = source.split({"train": 0.5, "test": 0.5})  # no labels to stratify by
        >>> from tfpipe.errors import TfpipeWarning
        >>> caught[0].category is TfpipeWarning
        True
    """


def tf_message(error: BaseException) -> str:
    """What a TensorFlow error says, without the traceback of a graph, the function-node
    prefix and the op suffix: `corrupted record at 12`."""
    text = str(getattr(error, "message", error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith("Graph execution error"):  # the message ends the trace
        lines = [line for line in lines if not line.startswith(("[[", "File "))][-1:]
    return _TF_PREFIX.sub("", lines[0]).split(" [Op:")[0] if lines else type(error).__name__
