"""TFRecord frames: their layout, and a scan that finds every record by its header alone.

A TFRecord file is a sequence of frames::

    uint64 length | uint32 masked crc32c(length) | data[length] | uint32 masked crc32c(data)

Reading the 12-byte headers and skipping the data gives the byte offset (and so the count) of
every record at a fraction of the cost of reading the records themselves.
"""

from __future__ import annotations

import struct
from typing import Any

import google_crc32c
import numpy as np

from tfpipe import fs
from tfpipe.errors import SourceError

FRAME_HEADER = struct.Struct("<QI")  # data length, masked crc32c of the length
DATA_CRC = struct.Struct("<I")  # after the data: masked crc32c of the data
FRAME_OVERHEAD = FRAME_HEADER.size + DATA_CRC.size
_PROGRESS_EVERY = 4096
_SCAN_BLOCK = 4 * 2**20


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C that TFRecord frames store for the length and for the data."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def scan_offsets(shard: fs.AnyPath, size: int, progress: Any = None) -> np.ndarray:
    """The byte offset of every record frame in an uncompressed TFRecord file.

    Only the 12-byte frame headers are read (with their length checksum); data is skipped.

    Raises:
        SourceError: the file is truncated or corrupt, naming the shard and the byte offset.
    """
    offsets: list[int] = []
    position = reported = 0
    reader = fs.random_reader(shard, _SCAN_BLOCK)  # URLs: buffered, one request per block
    try:
        while position < size:
            header = reader.pread(FRAME_HEADER.size, position)
            if len(header) < FRAME_HEADER.size:
                raise _corrupt(shard, position, len(offsets), "the file ends inside a header")
            length, checksum = FRAME_HEADER.unpack(header)
            if masked_crc32c(header[:8]) != checksum:
                raise _corrupt(shard, position, len(offsets), "the length checksum is wrong")
            end = position + FRAME_OVERHEAD + length
            if end > size:
                raise _corrupt(
                    shard, position, len(offsets), f"a {length}-byte record runs past the end"
                )
            offsets.append(position)
            position = end
            if progress is not None and len(offsets) % _PROGRESS_EVERY == 0:
                progress.update(position - reported)
                reported = position
    finally:
        reader.close()
    if progress is not None:
        progress.update(size - reported)
    return np.asarray(offsets, np.int64)


def _corrupt(shard: fs.AnyPath, position: int, record: int, why: str) -> SourceError:
    return SourceError(
        f"TFRecord file {str(shard)!r} is truncated or corrupt at byte offset {position} "
        f"(record {record}): {why}; rewrite the shard"
    )
