"""EXIF orientation of a JPEG, read and applied in a TensorFlow graph.

TensorFlow's decoders ignore EXIF; Pillow's path (`imaging.prepare`) turns images upright
with `ImageOps.exif_transpose`. This reads the orientation tag of IFD0 where cameras put it
(an APP1 "Exif" segment first, or right after a JFIF APP0) with a few vectorised byte
operations, and applies the same lossless flip or rotation.
"""

from __future__ import annotations

import tensorflow as tf

_ENTRIES = 32  # IFD0 entries searched for the orientation tag (cameras put it among the first)
_TAG = 0x0112
# Of each 12-byte IFD entry: its tag (bytes 0-1) and the first 2 bytes of its value (8-9).
_TAG_AND_VALUE = [2 + 12 * entry + byte for entry in range(_ENTRIES) for byte in (0, 1, 8, 9)]


def _bytes(data: tf.Tensor, start: tf.Tensor, length: int) -> tf.Tensor:
    """`length` bytes of `data` from `start` as int32, zeros past the end (only the window is
    copied and padded, not the whole file)."""
    start = tf.minimum(start, tf.strings.length(data))
    window = tf.strings.substr(data, start, tf.fill(tf.shape(start), length))
    padded = tf.strings.substr(window + b"\0" * length, 0, length)
    return tf.cast(tf.io.decode_raw(padded, tf.uint8), tf.int32)


def orientation(data: tf.Tensor) -> tf.Tensor:
    """The EXIF orientation (1-8) of an encoded JPEG, or of each of a vector of them; 1 when
    there is none. A vector costs the same few ops as one JPEG: compute it per batch.

    A vector's graph (~130 ops, read per batch) is traced once per process, then called; one
    JPEG's is built into the graph being traced (a call per image would cost more than it).
    """
    return _batch_orientation(data) if data.shape.rank == 1 else _read_orientation(data)


def _read_orientation(data: tf.Tensor) -> tf.Tensor:
    head = _bytes(data, tf.zeros_like(tf.strings.length(data)), 6)
    app0 = _matches(head, [None, None, 0xFF, 0xE0, None, None])
    app1 = tf.where(app0, 4 + tf.reduce_sum(head * [0, 0, 0, 0, 256, 1], -1), 2)
    # marker, length, "Exif\0\0", then the TIFF header: byte order, 42, IFD0's offset
    segment = _bytes(data, app1, 18)
    exif = _matches(segment, [0xFF, 0xE1, None, None, *b"Exif", *[None] * 10])
    if data.shape.rank == 0:  # most single files have no EXIF: skip the IFD search
        return tf.cond(exif, lambda: _ifd0(data, app1 + 10, segment), lambda: tf.constant(1))
    return tf.where(exif, _ifd0(data, app1 + 10, segment), 1)


def _matches(found: tf.Tensor, expected: list[int | None]) -> tf.Tensor:
    """Whether the last axis of `found` holds `expected` (None: any byte), in 3 ops."""
    care = [int(byte is not None) for byte in expected]
    return tf.reduce_all(found * care == [byte or 0 for byte in expected], axis=-1)


_batch_orientation = tf.function(
    _read_orientation, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
)


def _ifd0(data: tf.Tensor, tiff: tf.Tensor, segment: tf.Tensor) -> tf.Tensor:
    """The orientation tag of IFD0 in the TIFF block at `tiff` (`segment`: the 18 bytes of
    the APP1 segment that hold its header from byte 10 on).

    Numbers are the bytes times the powers of 256 of the block's byte order ("II": little
    endian, "MM": big), in int32 as before (a 4-byte offset over 2**31 wraps, then clips to 0).
    """
    little = _matches(segment, [*[None] * 10, 0x49, *[None] * 7])[..., tf.newaxis]
    two = tf.where(little, [1, 256], [256, 1])
    four = tf.where(little, [1, 1 << 8, 1 << 16, 1 << 24], [1 << 24, 1 << 16, 1 << 8, 1])
    offset = tf.reduce_sum(segment[..., 14:] * four, -1)
    ifd = _bytes(data, tiff + tf.clip_by_value(offset, 0, 1 << 16), 2 + 12 * _ENTRIES)
    count = tf.reduce_sum(ifd[..., :2] * two, -1, keepdims=True)
    lead = [-1] if data.shape.rank else []
    pairs = tf.reshape(tf.gather(ifd, _TAG_AND_VALUE, axis=-1), [*lead, _ENTRIES, 2, 2])
    tags, values = tf.unstack(
        tf.reduce_sum(pairs * two[..., tf.newaxis, tf.newaxis, :], -1), axis=-1
    )
    found = (tags == _TAG) & (tf.range(_ENTRIES) < count)
    value = tf.reduce_max(tf.where(found, values, 0), axis=-1)
    return tf.where((value >= 1) & (value <= 8), value, 1)


def upright(image: tf.Tensor, turn: tf.Tensor) -> tf.Tensor:
    """`image` (H, W, C) of EXIF orientation `turn`, turned as `ImageOps.exif_transpose` does.

    Orientations 5-8 are transposed, then 2-4 and 6-8 reversed along rows and/or columns:
    a transpose by a computed permutation (the identity gives the input back, no copy) and one
    conditional reverse, where a switch over the 8 orientations had 8 branch functions to
    trace and instantiate (`tf.image.rot90` in a branch doubled the cost of a decode).
    """
    turn = tf.reshape(turn, [])  # a scalar, also when sliced from a batch of unknown shape
    quarter = (turn - 1) % 4  # 0: as stored, 1: mirrored, 2: upside down, 3: flipped
    perm = tf.where(turn >= 5, tf.constant([1, 0, 2]), tf.constant([0, 1, 2]))
    image = tf.transpose(image, perm)
    flips = tf.stack([quarter >= 2, (quarter == 1) | (quarter == 2)])  # rows, columns
    return tf.cond(
        tf.reduce_any(flips),
        lambda: tf.reverse(image, tf.reshape(tf.where(flips), [-1])),  # the flipped axes
        lambda: image,
    )
