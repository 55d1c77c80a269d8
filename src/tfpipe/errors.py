"""The exceptions and warnings tfpipe raises.

Every error derives from `TfpipeError`, and from the built-in exception a caller would expect
(`ValueError` for bad values, `FileNotFoundError` for missing paths), so both
`except tfpipe.TfpipeError` and `except ValueError` work.
"""

from __future__ import annotations

import re

_TF_PREFIX = re.compile(r"^\{\{function_node [^}]*\}\}\s*")


class TfpipeError(Exception):
    """Base class of every error tfpipe raises."""


class SchemaError(TfpipeError, ValueError):
    """A schema or feature is declared wrongly, or does not match the data."""


class EncodeError(TfpipeError, ValueError):
    """An example could not be encoded (unreadable or corrupt image, decompression bomb, wrong
    dtype, unknown class name)."""


class DecodeError(TfpipeError, ValueError):
    """A stored record or an image file could not be decoded (or is a decompression bomb)."""


class SourceError(TfpipeError, ValueError):
    """A data source is empty, misses a column, or cannot be indexed."""


class DataNotFoundError(TfpipeError, FileNotFoundError):
    """A path, shard or metadata file does not exist."""


class TfpipeWarning(UserWarning):
    """Warnings tfpipe emits: skipped records, ignored arguments, partial caches."""


def tf_message(error: BaseException) -> str:
    """What a TensorFlow error says, without the traceback of a graph, the function-node
    prefix and the op suffix: `corrupted record at 12`."""
    text = str(getattr(error, "message", error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith("Graph execution error"):  # the message ends the trace
        lines = [line for line in lines if not line.startswith(("[[", "File "))][-1:]
    return _TF_PREFIX.sub("", lines[0]).split(" [Op:")[0] if lines else type(error).__name__
