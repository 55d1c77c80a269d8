"""The compression of TFRecord files: the argument, TensorFlow's name for it, and how a file
shows it (its suffix, or else its first bytes)."""

from __future__ import annotations

import os

from tfpipe import fs

SUFFIXES = {None: "", "gzip": ".gz", "zlib": ".zz"}
"""The suffix tfpipe's shard names end with, per compression."""
_GZIP_MAGIC = b"\x1f\x8b"


def check_compression(compression: str | None) -> str | None:
    """Normalizes a compression argument: None, "gzip" or "zlib" ("" and "none" mean None)."""
    if compression in (None, "", "none", "NONE"):
        return None
    value = str(compression).lower()
    if value not in ("gzip", "zlib"):
        raise ValueError(
            f"compression must be None, 'gzip' or 'zlib'. Received: compression={compression!r}"
        )
    return value


def tf_compression(compression: str | None) -> str:
    """The `compression_type` string TensorFlow's record readers and writers take."""
    return (compression or "").upper()


def compression_of(path: str | os.PathLike[str]) -> str | None:
    """The compression of a TFRecord file, from its suffix or else its first bytes."""
    name = os.fspath(path)
    if name.endswith((".gz", ".gzip")):
        return "gzip"
    if name.endswith((".zz", ".zlib")):
        return "zlib"
    return "gzip" if starts_like_gzip(name) else None


def starts_like_gzip(path: str | os.PathLike[str]) -> bool:
    """Whether a file's first bytes are gzip's (zlib's leave no such mark)."""
    with fs.path(os.fspath(path)).open("rb") as f:
        return f.read(2) == _GZIP_MAGIC


def describe_compression(compression: str | None) -> str:
    """A compression as a message says what a file is: "gzip", "zlib" or "not compressed"."""
    return compression or "not compressed"
