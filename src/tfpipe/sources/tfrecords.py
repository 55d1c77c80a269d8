"""A random-access source over uncompressed TFRecord shards, backed by an index of offsets.

A TFRecord file is a sequence of frames::

    uint64 length | uint32 masked crc32c(length) | data[length] | uint32 masked crc32c(data)

Scanning the frames once gives the byte offset of every record; the offsets are saved in an
index file per shard (`out/.tfpipe-index/<shard>.idx`, or in a cache folder when the shard's
folder is not writable), keyed by the shard's size and modification time so that a changed
shard is indexed again. Records are then read with one `os.pread` each (a seek + read on
TensorFlow's file stream for URLs such as `gs://`), which makes a true global shuffle of
TFRecords possible every epoch; each read verifies the frame's CRC-32C checksums
(google-crc32c, a few µs for a 50 KB record).
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import os
import struct
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from tfpipe import fs
from tfpipe.errors import SchemaError, SourceError, TfpipeError, TfpipeWarning
from tfpipe.format.compression import compression_of
from tfpipe.format.file_checks import check_counts
from tfpipe.format.frames import DATA_CRC, FRAME_HEADER, FRAME_OVERHEAD, masked_crc32c, scan_offsets
from tfpipe.format.naming import temporary_name
from tfpipe.format.resolution import PathArg, ResolvedData, resolve
from tfpipe.schema import Schema
from tfpipe.sources.base import SourceBase

INDEX_FOLDER = ".tfpipe-index"
_INDEX_MAGIC = b"TFPIDX01"
_INDEX_HEADER = struct.Struct("<8sQqQ")  # magic, shard size, shard mtime_ns, record count


def default_cache_dir() -> Path:
    """Where indexes go when a shard's folder is not writable: `$XDG_CACHE_HOME/tfpipe/index`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tfpipe" / "index"


def index_paths(
    shard: fs.AnyPath, cache_dir: str | os.PathLike[str] | None = None
) -> list[fs.AnyPath]:
    """The places the index of `shard` is looked for and saved, in order of preference."""
    digest = hashlib.sha1(os.fsencode(shard.resolve())).hexdigest()[:12]
    cache = fs.path(cache_dir, "cache_dir") if cache_dir is not None else default_cache_dir()
    return [shard.parent / INDEX_FOLDER / f"{shard.name}.idx", cache / f"{shard.name}-{digest}.idx"]


def read_index(path: fs.AnyPath, size: int, mtime_ns: int) -> np.ndarray | None:
    """The offsets stored in an index file, or None if it is missing, stale or damaged."""
    try:
        with path.open("rb") as f:
            header = f.read(_INDEX_HEADER.size)
            if len(header) < _INDEX_HEADER.size:
                return None
            magic, indexed_size, indexed_mtime, count = _INDEX_HEADER.unpack(header)
            if (magic, indexed_size, indexed_mtime) != (_INDEX_MAGIC, size, mtime_ns):
                return None
            offsets = np.frombuffer(f.read(), np.int64)
    except (OSError, TfpipeError):  # TfpipeError: a store's own failure, through tf.io.gfile
        return None
    return offsets if len(offsets) == count else None


def write_index(
    paths: list[fs.AnyPath], offsets: np.ndarray, size: int, mtime_ns: int
) -> fs.AnyPath | None:
    """Saves offsets to the first writable place among `paths`; None when none is writable."""
    data = _INDEX_HEADER.pack(_INDEX_MAGIC, size, mtime_ns, len(offsets)) + offsets.tobytes()
    for path in paths:
        temporary = path.with_name(temporary_name(path.name, str(os.getpid())))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(data)
            temporary.replace(path)  # type: ignore[arg-type]
        except (OSError, TfpipeError):
            with contextlib.suppress(OSError, TfpipeError):
                temporary.unlink(missing_ok=True)
            continue
        return path
    return None


class TFRecordSource(SourceBase):
    """Records of uncompressed TFRecord shards by global index; `src[i]` gives stored values.

    The source pickles cheaply (file names, sizes, per-shard counts): the offsets are reloaded
    from the index files and the shards opened lazily in each process that reads.

    Attributes:
        digests: the CRC-32C of each file that its metadata keeps (None where it keeps none):
            part of what a `SequenceLoader` position is valid for.
    """

    def __init__(
        self,
        files: list[fs.AnyPath],
        schema: Schema,
        cache_dir: str | os.PathLike[str] | None = None,
        digests: Sequence[str | None] = (),
    ) -> None:
        self._readers: dict[int, fs.RandomReader] = {}
        self.files = files
        self.schema = schema
        self.cache_dir = cache_dir
        self.digests = tuple(digests) or (None,) * len(files)
        stats = [f.stat() for f in files]
        self._sizes = [s.st_size for s in stats]
        self._mtimes = [s.st_mtime_ns for s in stats]
        self._index_files: list[fs.AnyPath | None] = [None] * len(files)
        offsets = self._build_indexes()
        self._offsets: list[np.ndarray] | None = offsets
        self._starts = [0, *np.cumsum([len(o) for o in offsets]).tolist()]
        if self._starts[-1] == 0:
            raise SourceError(f"the TFRecord files {[str(f) for f in files]} hold no records")

    def _build_indexes(self) -> list[np.ndarray]:
        """Loads each shard's saved index, or scans the shard and saves one."""
        offsets: dict[int, np.ndarray] = {}
        for k, shard in enumerate(self.files):
            for path in index_paths(shard, self.cache_dir):
                found = read_index(path, self._sizes[k], self._mtimes[k])
                if found is not None:
                    offsets[k], self._index_files[k] = found, path
                    break
        missing = [k for k in range(len(self.files)) if k not in offsets]
        total = sum(self._sizes[k] for k in missing)
        with tqdm(
            total=total, unit="B", unit_scale=True, desc="indexing TFRecords", delay=2.0
        ) as progress:
            for k in missing:
                shard = self.files[k]
                scanned = scan_offsets(shard, self._sizes[k], progress)
                saved = write_index(
                    index_paths(shard, self.cache_dir), scanned, self._sizes[k], self._mtimes[k]
                )
                if saved is None:
                    warnings.warn(
                        f"could not save the index of {str(shard)!r} beside it nor in "
                        f"{str(index_paths(shard, self.cache_dir)[1].parent)!r}; it will be "
                        "scanned again next time (pass a writable cache_dir=)",
                        TfpipeWarning,
                        stacklevel=4,
                    )
                offsets[k], self._index_files[k] = scanned, saved
        return [offsets[k] for k in range(len(self.files))]

    def __len__(self) -> int:
        return self._starts[-1]

    def _locate(self, index: int) -> tuple[int, int]:
        index = self.check_index(index)
        shard = bisect.bisect_right(self._starts, index) - 1
        return shard, index - self._starts[shard]

    def _shard_offsets(self) -> list[np.ndarray]:
        offsets = self._offsets
        if offsets is None:
            offsets = []
            for k, path in enumerate(self._index_files):
                found = None if path is None else read_index(path, self._sizes[k], self._mtimes[k])
                if found is None:
                    raise SourceError(
                        f"TFRecord file {str(self.files[k])!r} changed since the source was "
                        "created; create the source again"
                    )
                offsets.append(found)
            self._offsets = offsets
        return offsets

    def _reader(self, shard: int) -> fs.RandomReader:
        reader = self._readers.get(shard)
        if reader is None:
            frames = np.diff(self._shard_offsets()[shard], append=self._sizes[shard])
            opened = fs.random_reader(self.files[shard], int(frames.max(initial=0)))
            reader = self._readers.setdefault(shard, opened)
            if reader is not opened:
                opened.close()
        return reader

    def frame(self, index: int) -> tuple[int, int, int, bytes]:
        """The shard, index in the shard, byte offset and whole frame of record `index`.

        Raises:
            SourceError: the stored length is not the indexed one (the shard changed).
        """
        shard, local = self._locate(index)
        offsets = self._shard_offsets()[shard]
        bounds = offsets[local : local + 2].tolist()
        start = bounds[0]
        end = bounds[1] if len(bounds) == 2 else self._sizes[shard]
        frame = self._reader(shard).pread(end - start, start)
        stored_length = FRAME_HEADER.unpack_from(frame)[0] if frame else -1
        if len(frame) != end - start or stored_length != end - start - FRAME_OVERHEAD:
            raise SourceError(
                f"TFRecord file {str(self.files[shard])!r} changed since it was indexed "
                f"(record {local} at byte offset {start}); create the source again"
            )
        return shard, local, start, frame

    def read(self, index: int) -> bytes:
        """The serialized bytes of record `index`, with the checksums of its frame verified.

        Raises:
            SourceError: the frame's checksums do not match (the data is corrupt), or the
                shard changed since it was indexed; the message names the shard, the record
                and its byte offset.
        """
        shard, local, start, frame = self.frame(index)
        end = len(frame) - DATA_CRC.size
        if masked_crc32c(frame[:8]) != FRAME_HEADER.unpack_from(frame)[1]:
            raise self._corrupt(shard, local, start, "length")
        data = frame[FRAME_HEADER.size : end]
        if masked_crc32c(data) != DATA_CRC.unpack_from(frame, end)[0]:
            raise self._corrupt(shard, local, start, "data")
        return data

    def _corrupt(self, shard: int, local: int, start: int, part: str) -> SourceError:
        return SourceError(
            f"TFRecord file {str(self.files[shard])!r} is corrupt: record {local} at byte offset "
            f"{start} fails the CRC-32C checksum of its {part}, so its bytes are damaged (on "
            "disk or in a copy); restore the shard from a good copy or write the dataset again"
        )

    @property
    def shard_counts(self) -> list[int]:
        """The number of records in each shard, in the order of `files`."""
        return np.diff(self._starts).tolist()

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.schema.stored(self.read(index), where=lambda: self.origin(index))

    def origin(self, index: int) -> str:
        shard, local = self._locate(index)
        return f"record {local} of {self.files[shard]}"

    def close(self) -> None:
        """Closes the shard files this process opened (they reopen on the next read)."""
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            reader.close()

    def __del__(self) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_readers"] = {}
        if None not in self._index_files:
            state["_offsets"] = None
        return state


def from_tfrecords(
    path: PathArg | ResolvedData,
    schema: Schema | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    split: str | None = None,
) -> TFRecordSource:
    """A random-access source over uncompressed TFRecord shards, for a true global shuffle.

    The first use scans every shard once (a progress bar shows when it takes long) and saves
    an index of record offsets in `.tfpipe-index/` beside the shards, or in `cache_dir` when
    that folder is not writable; a shard whose size or modification time changed is indexed
    again. `src[i]` is a dict of stored values (JPEG bytes, class indices, arrays), which the
    schema's features load. The length checksums are verified when indexing, and both
    checksums of a record's frame (CRC-32C of length and data) on every read.

    Nothing is read silently short: with a metadata file (`<prefix>.json`), each shard's size
    and record count must be the ones it declares; shards named `<prefix>-NNNNN-of-NNNNN`
    without metadata must all be there (a warning says their counts, sizes and checksums
    cannot be checked); a
    zero-byte file is refused unless the metadata declares it empty. A prepared TensorFlow
    Datasets folder is read without TFDS, one split at a time (`split="train"`, or the path
    `.../mnist-train`), each shard holding the records `dataset_info.json` lists; a folder
    or glob that would merge several splits is an error listing them.

    Examples:
        >>> src = tfpipe.from_tfrecords("out/train")
        >>> len(src), src.origin(17)
        (24, 'record 5 of out/train-00001-of-00002.tfrecord')

    Args:
        path: a dataset prefix (`out/train`, with its `out/train.json`), a file, a folder, a
            glob, or a list of them; local, or a URL TensorFlow opens (`gs://bucket/train`:
            records are read by seek + read, the index saved beside the shards).
        schema: the schema of the records. Defaults to the one in the dataset's metadata file.
        cache_dir: where indexes go when the shards' folder is not writable.
            Defaults to `$XDG_CACHE_HOME/tfpipe/index` (`~/.cache/tfpipe/index`).
        split: the split to read when `path` is a folder: a TFDS split ("train"), or the
            name of a tfpipe dataset prefix in the folder. Defaults to None (the folder's
            only TFDS split; every TFRecord file of another folder).

    Raises:
        SourceError: a shard is compressed (gzip/zlib files cannot be read at random offsets),
            truncated, corrupt, empty, or does not match its metadata; reading a record whose
            checksum fails raises it too, naming the shard, record and byte offset.
        DataNotFoundError: shards of a dataset without metadata are missing, or `path` is a
            URL whose scheme TensorFlow cannot open.
    """
    data = resolve(path, split=split)
    files, declared = data.record_files("from_tfrecords"), data.declared
    for file in files:
        compression = compression_of(file)
        if compression is not None:
            raise SourceError(
                f"TFRecord file {str(file)!r} is {compression}-compressed, and compressed files "
                "cannot be read at random offsets; write the dataset with compression=None, or "
                "read it sequentially with a tf.data pipeline"
            )
    schema = data.schema(schema)
    if schema is None:
        raise SchemaError(
            f"no tfpipe metadata file found for {[str(f) for f in files[:3]]}; pass schema= "
            f"(e.g. schema=tfpipe.infer_schema({data.origin!r})), or write the dataset with "
            "tfpipe.write_tfrecords (which saves <prefix>.json)"
        )
    digests = [declared[f].shard.crc32c if f in declared else None for f in files]
    source = TFRecordSource(files, schema, cache_dir, digests)
    check_counts(files, source.shard_counts, declared)
    return source
