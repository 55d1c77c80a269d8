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

    A vector's graph (~200 ops, read per batch) is traced once per process, then called; one
    JPEG's is built into the graph being traced (a call per image would cost more than it).
    """
    return _batch_orientation(data) if data.shape.rank == 1 else _read_orientation(data)


def _read_orientation(data: tf.Tensor) -> tf.Tensor:
    head = _bytes(data, tf.zeros_like(tf.strings.length(data)), 6)
    app0 = (head[..., 2] == 0xFF) & (head[..., 3] == 0xE0)
    app1 = tf.where(app0, 4 + head[..., 4] * 256 + head[..., 5], 2)
    segment = _bytes(data, app1, 18)  # marker, length, "Exif\0\0", TIFF byte order, 42, offset
    exif = (
        (segment[..., 0] == 0xFF)
        & (segment[..., 1] == 0xE1)
        & tf.reduce_all(segment[..., 4:8] == tf.constant(list(b"Exif"), tf.int32), axis=-1)
    )
    if data.shape.rank == 0:  # most single files have no EXIF: skip the IFD search
        return tf.cond(exif, lambda: _ifd0(data, app1 + 10, segment[10:]), lambda: tf.constant(1))
    return tf.where(exif, _ifd0(data, app1 + 10, segment[..., 10:]), 1)


_batch_orientation = tf.function(
    _read_orientation, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
)


def _ifd0(data: tf.Tensor, tiff: tf.Tensor, header: tf.Tensor) -> tf.Tensor:
    """The orientation tag of IFD0 in the TIFF block at `tiff` (`header`: its first 8 bytes)."""
    little = header[..., 0] == 0x49  # "II"; "MM" is big-endian

    def number(low_first: tf.Tensor, high_first: tf.Tensor) -> tf.Tensor:
        return tf.where(little, low_first + high_first * 256, low_first * 256 + high_first)

    bytes_ = [header[..., i] for i in range(4, 8)]
    offset = tf.where(
        little,
        bytes_[0] + bytes_[1] * 256 + bytes_[2] * 65536 + bytes_[3] * 16777216,
        bytes_[3] + bytes_[2] * 256 + bytes_[1] * 65536 + bytes_[0] * 16777216,
    )
    ifd = _bytes(data, tiff + tf.clip_by_value(offset, 0, 1 << 16), 2 + 12 * _ENTRIES)
    entries = tf.reshape(ifd[..., 2:], tf.concat([tf.shape(ifd)[:-1], [_ENTRIES, 12]], 0))
    little = little[..., tf.newaxis]
    tags = number(entries[..., 0], entries[..., 1])
    count = number(ifd[..., 0:1], ifd[..., 1:2])
    found = (tags == _TAG) & (tf.range(_ENTRIES) < count)
    value = tf.reduce_max(tf.where(found, number(entries[..., 8], entries[..., 9]), 0), axis=-1)
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
        lambda: tf.reverse(image, tf.boolean_mask(tf.constant([0, 1]), flips)),
        lambda: image,
    )
