"""The one place tfpipe opens files: `tf.io.gfile` for URLs, the standard library for local paths.

    "out/train", Path("out/train") ──path()──▶ pathlib.Path   (os, open, os.pread: fast)
    "gs://bucket/train", "ram://x" ──path()──▶ GPath         (tf.io.gfile, string-kept URL)

A `GPath` keeps its URL as a string (`pathlib` would collapse `gs://` to `gs:/`) and answers
the part of the `pathlib.Path` interface tfpipe uses, so the code above works on both. A
`file://` URL goes through `tf.io.gfile` too (what the benchmarks use to compare the two).
A URL whose scheme TensorFlow has no filesystem for fails at once, naming the scheme and
what registers it.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob as _glob
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

import tensorflow as tf
from tensorflow.python.lib.io import _pywrap_file_io

from tfpipe.errors import DataNotFoundError, TfpipeError, tf_message

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
# Schemes a TensorFlow plugin package registers when it is imported, and how to get it.
_PLUGINS = {
    "s3": "tensorflow_io",
    "hdfs": "tensorflow_io",
    "viewfs": "tensorflow_io",
    "har": "tensorflow_io",
    "az": "tensorflow_io",
    "http": "tensorflow_io",
    "https": "tensorflow_io",
}
_INSTALL = {"tensorflow_io": "pip install tensorflow-io (and `import tensorflow_io`)"}
# The buffer of a random-access stream on a URL: the largest record, within these bounds.
_MIN_BLOCK = 4096
_MAX_BLOCK = 4 * 2**20


def scheme_of(text: str) -> str | None:
    """The URL scheme of a path ("gs" for "gs://bucket/x"), None for a local path."""
    match = _URL.match(text)
    return match["scheme"].lower() if match else None


def _registered() -> list[str]:
    return sorted(s for s in tf.io.gfile.get_registered_schemes() if s)


def check_scheme(text: str, argument: str = "path") -> None:
    """Raises when `text` is a URL whose scheme no TensorFlow filesystem opens.

    A known plugin package (tensorflow-io for `s3://`, `hdfs://`) is imported when it is
    installed, which registers its schemes.

    Raises:
        DataNotFoundError: the scheme is not registered; names the argument, the scheme, the
            registered ones and what adds it.
    """
    scheme = scheme_of(text)
    if scheme is None or scheme in _registered():
        return
    plugin = _PLUGINS.get(scheme)
    if plugin is not None:
        try:
            __import__(plugin)
        except ImportError:
            pass
        else:
            if scheme in _registered():
                return
    near = difflib.get_close_matches(scheme, [*_registered(), *_PLUGINS], n=1, cutoff=0.5)
    hint = (
        f"it is added by {plugin}: {_INSTALL[plugin]}"
        if plugin is not None
        else (f"did you mean '{near[0]}://'? " if near else "a typo? ")
        + "tfpipe knows no TensorFlow filesystem plugin for it"
    )
    raise DataNotFoundError(
        f"{argument}={text!r}: TensorFlow has no filesystem for the scheme '{scheme}://' "
        f"(registered: {', '.join(f'{s}://' for s in _registered())}); {hint}"
    )


@dataclasses.dataclass(frozen=True)
class GStat:
    """What `tf.io.gfile.stat` says, under the names of `os.stat_result`."""

    st_size: int
    st_mtime_ns: int


def _gfile(url: str, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, a `tf.io.gfile` call on `url`, its errors as tfpipe's."""
    try:
        return fn(*args, **kwargs)
    except tf.errors.OpError as e:
        raise _failed(url, what, e) from e


def _failed(url: str, what: str, error: tf.errors.OpError) -> TfpipeError:
    """A TensorFlow filesystem error as tfpipe's, naming the URL and what was done."""
    message = f"cannot {what} {url!r}: {tf_message(error)}"
    if isinstance(error, tf.errors.NotFoundError):
        return DataNotFoundError(message)
    return TfpipeError(f"{message} (check the credentials and the network of this store)")


class GPath:
    """A file or folder TensorFlow opens by URL (`gs://bucket/x`, `ram://x`, `file:///x`).

    The URL stays a string; `str()` and `os.fspath()` give it back unchanged.
    """

    __slots__ = ("_url",)

    def __init__(self, url: str) -> None:
        root = _URL.match(url)
        end = root.end() if root else 0
        self._url = url[:end] + url[end:].rstrip("/")

    def __str__(self) -> str:
        return self._url

    def __fspath__(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"GPath({self._url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GPath) and other._url == self._url

    def __hash__(self) -> int:
        return hash(self._url)

    def __truediv__(self, name: str) -> GPath:
        return GPath(f"{self._url}/{name}")

    @property
    def _split(self) -> tuple[str, str]:
        root = _URL.match(self._url)
        end = root.end() if root else 0
        head, _, name = self._url[end:].rpartition("/")
        return self._url[:end] + head, name

    @property
    def name(self) -> str:
        return self._split[1]

    @property
    def parent(self) -> GPath:
        return GPath(self._split[0])

    @property
    def suffix(self) -> str:
        stem, dot, suffix = self.name.rpartition(".")
        return f".{suffix}" if dot and stem else ""

    @property
    def stem(self) -> str:
        return self.name[: len(self.name) - len(self.suffix)]

    def with_name(self, name: str) -> GPath:
        return self.parent / name

    def resolve(self) -> GPath:
        return self

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return _gfile(self._url, what, fn, *args, **kwargs)

    def stat(self) -> GStat:
        found = self._call("stat", tf.io.gfile.stat, self._url)
        return GStat(found.length, found.mtime_nsec)

    def exists(self) -> bool:
        return bool(self._call("look for", tf.io.gfile.exists, self._url))

    def is_dir(self) -> bool:
        return bool(self._call("look for", tf.io.gfile.isdir, self._url))

    def is_file(self) -> bool:
        return self.exists() and not self.is_dir()

    def iterdir(self) -> Iterator[GPath]:
        for name in self._call("list", tf.io.gfile.listdir, self._url):
            yield self / name.rstrip("/")

    def glob(self, pattern: str) -> Iterator[GPath]:
        for found in self._call("list", tf.io.gfile.glob, f"{self._url}/{pattern}"):
            yield GPath(found)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        del parents, exist_ok  # object stores have no folders to create one by one
        self._call("create the folder", tf.io.gfile.makedirs, self._url)

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            tf.io.gfile.remove(self._url)
        except tf.errors.NotFoundError as e:
            if not missing_ok:
                raise _failed(self._url, "remove", e) from e
        except tf.errors.OpError as e:
            raise _failed(self._url, "remove", e) from e

    def replace(self, target: GPath) -> GPath:
        """Renames to `target`, replacing it; on object stores a copy, then a delete."""
        self._call("rename", tf.io.gfile.rename, self._url, str(target), overwrite=True)
        return target

    def open(self, mode: str = "r") -> IO[Any]:
        handle = tf.io.gfile.GFile(self._url, mode)
        if "r" in mode:
            self._call("open", handle.seek, 0)  # a GFile opens on first use: fail here, named
        return handle

    def read_bytes(self) -> bytes:
        with self.open("rb") as f:
            return self._call("read", f.read)

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def write_bytes(self, data: bytes) -> int:
        self.unlink(missing_ok=True)  # ram:// appends to a file opened with "wb"
        with self.open("wb") as f:
            self._call("write", f.write, data)
        return len(data)

    def write_text(self, text: str) -> int:
        return self.write_bytes(text.encode())


AnyPath = Path | GPath
PathLike = str | os.PathLike[str]


def path(value: PathLike, argument: str = "path") -> AnyPath:
    """`value` as a `Path` (local) or a `GPath` (a URL), the URL's scheme checked.

    Raises:
        DataNotFoundError: see `check_scheme`.
    """
    if isinstance(value, Path | GPath):
        return value
    text = os.fspath(value)
    if scheme_of(text) is None:
        return Path(text)
    check_scheme(text, argument)
    return GPath(text)


def _check_local(text: str, argument: str) -> None:
    """Raises for a local path that is a URL with its `//` collapsed (`gs:/bucket/x`): what
    `pathlib.Path("gs://bucket/x")` makes, which would write to a local folder `gs:`."""
    head, slash, rest = text.partition(":/")
    if slash and head.lower() in {*_registered(), *_PLUGINS}:
        raise DataNotFoundError(
            f"{argument}={text!r} is a local path that looks like the URL "
            f"'{head}://{rest}' with a slash lost (pathlib.Path collapses '//'): pass URLs as "
            f"strings, e.g. '{head}://{rest}'"
        )


def check_paths(value: Any, argument: str) -> None:
    """Checks every path of a path argument (a path or a list of them) before any work: a
    URL's scheme must be one TensorFlow opens, and a local path must not be a URL whose `//`
    `pathlib` collapsed.

    Raises:
        DataNotFoundError: naming `argument`; see `check_scheme`.
    """
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if isinstance(item, str | os.PathLike):
            text = os.fspath(item)
            if scheme_of(text) is None:
                _check_local(text, argument)
            else:
                check_scheme(text, argument)


def is_url(value: Any) -> bool:
    """Whether a path argument is a URL (kept a string, opened with tf.io.gfile)."""
    return isinstance(value, GPath) or (
        isinstance(value, str | os.PathLike) and scheme_of(os.fspath(value)) is not None
    )


def glob(pattern: str) -> list[str]:
    """The paths matching a glob pattern, sorted (hidden names included on URLs)."""
    if scheme_of(pattern) is None:
        return sorted(_glob.glob(pattern))
    return sorted(_gfile(pattern, "list", tf.io.gfile.glob, pattern))


def escape(text: str) -> str:
    """A path with glob's special characters escaped, its `scheme://` kept as is."""
    root = _URL.match(text)
    end = root.end() if root else 0
    return text[:end] + _glob.escape(text[end:])


class RandomReader(Protocol):
    """Reads `size` bytes at `offset` of one file, from any thread."""

    def pread(self, size: int, offset: int) -> bytes: ...

    def close(self) -> None: ...


class _LocalReader:
    """`os.pread` on one descriptor: no seek, so threads share it."""

    # Kept by the class: a source alive until the interpreter exits is closed after the
    # module's globals (`os`) are gone.
    _close = staticmethod(os.close)

    def __init__(self, file: Path) -> None:
        self._fd = os.open(file, os.O_RDONLY)

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def close(self) -> None:
        self._close(self._fd)


class _GFileReader:
    """Seek + read on TensorFlow's buffered file stream (the one a `tf.io.gfile.GFile` reads
    through), one stream per thread since a stream has one position.

    A GFile's own stream buffers 512 KiB, refilled by every read at a random offset: 125 µs
    for an 800-byte record on a local disk (measured), against 2-3 µs with a buffer the size
    of the largest record (one fill per record). TensorFlow's Python API has no read at an
    offset: every seek past the buffer costs the stream a 1-byte probe read (TensorFlow's
    `RandomAccessInputStream::SkipNBytes`) and the read copies the bytes twice more: 2.4 µs
    per 3 KB record against 0.7 µs for `os.pread` (benchmarks/bench_filesystems.py), which is
    why local paths use `os.pread`.
    `tf_record_random_reader` is no way around it: its RecordReader seeks a 16 MiB buffered
    stream, refilled at every backward seek (~120 µs per record of an 8 MB shard).
    """

    _new_local = threading.local  # kept by the class, as `_LocalReader._close`

    def __init__(self, file: GPath, block: int) -> None:
        self._file = file
        self._block = min(max(block, _MIN_BLOCK), _MAX_BLOCK)
        self._local = self._new_local()

    def pread(self, size: int, offset: int) -> bytes:
        try:
            stream = getattr(self._local, "stream", None)
            if stream is None:
                stream = _pywrap_file_io.BufferedInputStream(str(self._file), self._block)
                self._local.stream = stream
            stream.seek(offset)
            return stream.read(size)
        except tf.errors.OpError as e:
            raise _failed(str(self._file), "read", e) from e

    def close(self) -> None:
        self._local = self._new_local()  # the streams of every thread go with the old one


def random_reader(file: AnyPath, block: int) -> RandomReader:
    """A reader of byte ranges of `file`: `os.pread` locally; on URLs, seek + read on a
    TensorFlow file stream whose buffer holds `block` bytes (the largest read expected)."""
    return _GFileReader(file, block) if isinstance(file, GPath) else _LocalReader(file)
