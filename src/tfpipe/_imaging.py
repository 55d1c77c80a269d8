"""Pillow helpers shared by the schema codec and the Keras loader (no TensorFlow here)."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from PIL import Image as PILImage
from PIL import ImageOps

JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_MODE_FOR_CHANNELS = {1: "L", 3: "RGB", 4: "RGBA"}
_CHANNELS_FOR_MODE = {"L": 1, "RGB": 3, "RGBA": 4}
_EXIF_ORIENTATION = 0x0112
_TRANSPOSED_ORIENTATIONS = (5, 6, 7, 8)


def sniff_format(data: bytes) -> str | None:
    """Returns "jpeg" or "png" from the magic bytes, or None."""
    if data.startswith(JPEG_MAGIC):
        return "jpeg"
    if data.startswith(PNG_MAGIC):
        return "png"
    return None


def read_bytes(value: Any) -> bytes | None:
    """Returns the encoded bytes of a path or bytes value, None for anything else."""
    if type(value) is bytes:  # no copy of bytes as they are
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (str, os.PathLike)):
        with open(value, "rb") as f:
            return f.read()
    return None


def open_image(value: Any) -> PILImage.Image:
    """Opens a path, encoded bytes, a PIL image or a uint8 array as a PIL image (lazily)."""
    if isinstance(value, PILImage.Image):
        return value
    if isinstance(value, np.ndarray):
        return _image_from_array(value)
    data = read_bytes(value)
    if data is None:
        raise TypeError(
            "expected a file path, encoded image bytes, a PIL.Image or a uint8 array, "
            f"got {type(value).__name__}"
        )
    return PILImage.open(io.BytesIO(data))


def _image_from_array(array: np.ndarray) -> PILImage.Image:
    if array.dtype != np.uint8:
        raise TypeError(f"expected a uint8 image array, got dtype {array.dtype}")
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)):
        raise TypeError(f"expected an image array of shape (H, W[, 1|3|4]), got {array.shape}")
    return PILImage.fromarray(array)


def orientation(image: PILImage.Image) -> int:
    """The EXIF orientation tag of an image (1 when absent)."""
    try:
        return int(image.getexif().get(_EXIF_ORIENTATION, 1))
    except Exception:  # a broken EXIF block is no orientation at all
        return 1


def is_complete(data: bytes, fmt: str) -> bool:
    """Cheap truncation check: the end-of-image marker is present near the end."""
    marker = b"\xff\xd9" if fmt == "jpeg" else b"IEND\xaeB`\x82"
    return data.endswith(marker) or data.find(marker[:4], max(0, len(data) - 1024)) >= 0


def can_copy(
    image: PILImage.Image, data: bytes, fmt: str, size: tuple[int | None, int | None], channels: int
) -> bool:
    """Whether encoded bytes can be stored as they are: same format, size, channels, upright."""
    height, width = size
    return (
        image.format is not None
        and image.format.lower() == fmt
        and _CHANNELS_FOR_MODE.get(image.mode) == channels
        and height in (None, image.height)
        and width in (None, image.width)
        and orientation(image) == 1
        and is_complete(data, fmt)
    )


# Start-of-frame markers (SOF0-SOF15 without DHT, JPG and DAC), and the segments that make the
# header alone unsafe to judge: APP1 (EXIF orientation) and APP2 (multi-picture MPO).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_UNSAFE_MARKERS = frozenset({0xE1, 0xE2, 0xD8, 0xD9, 0xDA})


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """`(height, width, components)` from a JPEG's frame header, without Pillow.

    Returns None when the header alone is not enough to judge the image (EXIF or
    multi-picture segments, an unusual layout); callers then open the image with Pillow.
    """
    pos, end = 2, len(data)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker in _SOF_MARKERS:
            if pos + 10 > end:
                return None
            height = int.from_bytes(data[pos + 5 : pos + 7], "big")
            width = int.from_bytes(data[pos + 7 : pos + 9], "big")
            return (height, width, data[pos + 9]) if height and width else None
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if marker in _UNSAFE_MARKERS or length < 2:
            return None
        pos += 2 + length
    return None


def copyable(data: bytes, fmt: str, size: tuple[int | None, int | None], channels: int) -> bool:
    """`can_copy` for encoded bytes; reads only the frame header of a plain JPEG (fast)."""
    header = jpeg_header(data) if fmt == "jpeg" else None
    if header is None:
        return can_copy(open_image(data), data, fmt, size, channels)
    height, width, components = header
    return (
        components == channels
        and size[0] in (None, height)
        and size[1] in (None, width)
        and is_complete(data, fmt)
    )


def prepare(
    image: PILImage.Image, channels: int, size: tuple[int | None, int | None] = (None, None)
) -> PILImage.Image:
    """Decodes to a PIL image with `channels`, upright and resized to `size`.

    A JPEG that is larger than the target is decoded at a reduced DCT scale first (Pillow's
    draft mode), which is several times faster than a full decode followed by a resize.
    Decoding errors (a truncated or corrupt file) raise OSError here, not later.
    """
    height, width = size
    turned = orientation(image) in _TRANSPOSED_ORIENTATIONS
    if image.format == "JPEG" and height is not None and width is not None:
        draft_mode = _MODE_FOR_CHANNELS[channels] if image.mode in ("RGB", "L") else None
        if channels == 4:
            draft_mode = None
        image.draft(draft_mode, (height, width) if turned else (width, height))
    image = ImageOps.exif_transpose(image) if orientation(image) != 1 else image
    mode = _MODE_FOR_CHANNELS[channels]
    if image.mode != mode:
        if image.mode == "P" and "transparency" in image.info:
            image = image.convert("RGBA")
        image = image.convert(mode)
    target = (width or image.width, height or image.height)
    if target != image.size:
        image = image.resize(target, PILImage.Resampling.BILINEAR)
    image.load()
    return image


def as_array(image: PILImage.Image) -> np.ndarray:
    """The pixels of a prepared image as a uint8 array of shape (H, W, C)."""
    pixels = np.asarray(image)
    return pixels[..., np.newaxis] if pixels.ndim == 2 else pixels


def encode_image(image: PILImage.Image, fmt: str, quality: int) -> bytes:
    """Encodes a prepared image as JPEG or PNG bytes (no copy through numpy)."""
    buffer = io.BytesIO()
    if fmt == "jpeg":
        image.save(buffer, format="JPEG", quality=quality)
    else:
        image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()
