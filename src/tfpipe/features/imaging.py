"""Pillow helpers shared by the schema codec and the Keras loader (no TensorFlow here).

`prepare` decodes the way TensorFlow's decoders do (`Image.decode_tensor`), so the Pillow path
(SequenceLoader, writer) and the tf.data path give the same pixels for every image mode; the
table is in docs/reliability.md.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from PIL import Image as PILImage
from PIL import ImageOps

from tfpipe.errors import DecodeError, SchemaError

JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_MODE_FOR_CHANNELS = {1: "L", 3: "RGB", 4: "RGBA"}
# libpng's rgb_to_gray weights (15-bit fixed point, truncated), which TensorFlow's PNG decoder
# uses for channels=1; Pillow's own convert("L") rounds other weights and differs by 1.
GRAY_WEIGHTS = (9797, 19234, 3737)
SIXTEEN_BIT_GRAY = ("I", "I;16", "I;16B", "I;16L", "I;16N")
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
    header = image_size(data)
    if header is not None:  # checked before Pillow, so it neither warns nor raises its own
        check_pixels(*header)
    try:
        image = PILImage.open(io.BytesIO(data))
    except PILImage.DecompressionBombError as e:
        raise DecodeError(
            f"{e} (Pillow's decompression-bomb limit); if the file is trusted, raise "
            "PIL.Image.MAX_IMAGE_PIXELS"
        ) from e
    check_pixels(image.width, image.height)
    return image


def check_pixels(width: int, height: int) -> None:
    """Raises DecodeError for an image above Pillow's decompression-bomb limit.

    Pillow only warns up to twice `PIL.Image.MAX_IMAGE_PIXELS`; tfpipe refuses from the limit
    on, in every reader and the writer, so a bomb never reaches a decoder silently.
    """
    limit = PILImage.MAX_IMAGE_PIXELS
    if limit is not None and width * height > limit:
        raise DecodeError(
            f"image of {width}x{height} pixels ({width * height / 1e6:.1f} MP) exceeds the "
            f"decompression-bomb limit of {limit / 1e6:.1f} MP (PIL.Image.MAX_IMAGE_PIXELS); "
            "if the file is trusted, raise PIL.Image.MAX_IMAGE_PIXELS"
        )


def image_size(data: bytes) -> tuple[int, int] | None:
    """`(width, height)` from the header of a JPEG, PNG, GIF or BMP, without Pillow."""
    if data.startswith(JPEG_MAGIC):
        frame = _jpeg_frame(data)
        return None if frame is None else (frame[1], frame[0])
    if data.startswith(PNG_MAGIC) and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data.startswith(b"BM") and len(data) >= 26:
        width = int.from_bytes(data[18:22], "little", signed=True)
        return abs(width), abs(int.from_bytes(data[22:26], "little", signed=True))
    return None


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
    image: PILImage.Image,
    data: bytes,
    *,
    fmt: str,
    size: tuple[int | None, int | None],
    channels: int,
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


# Start-of-frame markers (SOF0-SOF15 without DHT, JPG and DAC); markers that end the header
# scan; and the segments that make the header alone unsafe to judge: APP1 (EXIF orientation)
# and APP2 (multi-picture MPO).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_END_MARKERS = frozenset({0xD8, 0xD9, 0xDA})
_UNSAFE_MARKERS = frozenset({0xE1, 0xE2})


def _jpeg_frame(data: bytes) -> tuple[int, int, int, bool] | None:
    """`(height, width, components, plain)` from a JPEG's frame header; `plain` is False when
    EXIF or multi-picture segments come first. None for an unusual layout."""
    pos, end, plain = 2, len(data), True
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
            return (height, width, data[pos + 9], plain) if height and width else None
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if marker in _END_MARKERS or length < 2:
            return None
        plain = plain and marker not in _UNSAFE_MARKERS
        pos += 2 + length
    return None


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """`(height, width, components)` from a JPEG's frame header, without Pillow.

    Returns None when the header alone is not enough to judge the image (EXIF or
    multi-picture segments, an unusual layout); callers then open the image with Pillow.
    """
    frame = _jpeg_frame(data)
    return frame[:3] if frame is not None and frame[3] else None


def copyable(data: bytes, fmt: str, size: tuple[int | None, int | None], channels: int) -> bool:
    """`can_copy` for encoded bytes; reads only the frame header of a plain JPEG (fast)."""
    header = jpeg_header(data) if fmt == "jpeg" else None
    if header is None:
        return can_copy(open_image(data), data, fmt=fmt, size=size, channels=channels)
    height, width, components = header
    return (
        components == channels
        and size[0] in (None, height)
        and size[1] in (None, width)
        and is_complete(data, fmt)
    )


def prepare(
    image: PILImage.Image,
    channels: int,
    size: tuple[int | None, int | None] = (None, None),
    reduced: bool = True,
) -> PILImage.Image:
    """Decodes to a PIL image with `channels`, upright and resized to `size`.

    With `reduced`, a JPEG at least twice the target in both sides is first decoded at the
    smallest DCT scale (1/2, 1/4 or 1/8, Pillow's draft mode) that still covers the target,
    several times cheaper than a full decode; then `resize`. Decoding errors (a truncated or
    corrupt file) raise OSError here, not later.
    """
    height, width = size
    fmt, wide = image.format, _sixteen_bit_colour(image)  # before orientation() loads a PNG
    turned = orientation(image) in _TRANSPOSED_ORIENTATIONS
    if fmt == "JPEG":
        # libjpeg converts to grayscale itself (its luma), as TensorFlow's decoder does.
        draft_mode = "L" if channels == 1 and image.mode == "RGB" else None
        scale = None
        if width is not None and height is not None and reduces_jpeg(reduced, channels, size):
            scale = (height, width) if turned else (width, height)
        image.draft(draft_mode, scale)
    image = ImageOps.exif_transpose(image) if orientation(image) != 1 else image
    # Gray made colour after the resize: the same pixels (each band is resized alone) for a
    # third of the resize and a copy of the small image, not the large one.
    colour_later = channels == 3 and image.mode == "L"
    image = to_channels(image, 1 if colour_later else channels, fmt, wide)
    target = (width or image.width, height or image.height)
    if target != image.size:
        image = resize(image, target)
    image.load()
    return image.convert("RGB") if colour_later else image


def resize(image: PILImage.Image, size: tuple[int, int]) -> PILImage.Image:
    """tfpipe's one resize of images to `size` (width, height), which `resize_and_scale` does
    in TensorFlow with the same pixels (docs/performance.md, "One resize").

    A side at least twice its target is first averaged over blocks of k pixels, k its whole
    shrink (`box_reduce`); then bilinear interpolation between pixel centres, rounded down,
    takes what is left (under twice the target: any enlargement, what a JPEG's DCT-scale
    decode leaves, what the blocks leave). Bands are resized apart: Pillow would premultiply
    alpha, TensorFlow does not.
    """
    if image.mode == "RGBA":
        return PILImage.merge("RGBA", [resize(band, size) for band in image.split()])
    image = box_reduce(image, size)
    if image.size == size:
        return image
    width, height = size
    shrink = (image.width / width, 0, 0, 0, image.height / height, 0)
    return image.transform(size, PILImage.Transform.AFFINE, shrink, PILImage.Resampling.BILINEAR)


def box_reduce(image: PILImage.Image, size: tuple[int, int]) -> PILImage.Image:
    """Means of kx x ky blocks (Pillow's `reduce`), where k is a side's whole shrink from
    twice its target (width, height) on, else 1; the pixels left over (fewer than k) are cut
    evenly from both ends. The image itself when no side is twice its target."""
    kx = image.width // size[0] if image.width >= 2 * size[0] else 1
    ky = image.height // size[1] if image.height >= 2 * size[1] else 1
    if kx == ky == 1:
        return image
    width, height = image.width // kx * kx, image.height // ky * ky
    left, top = (image.width - width) // 2, (image.height - height) // 2
    return image.reduce((kx, ky), box=(left, top, left + width, top + height))


def reduces_jpeg(reduced: bool, channels: int, size: tuple[int | None, int | None]) -> bool:
    """Whether a JPEG is decoded at a reduced DCT scale, on every path: asked for, a fixed
    target size, and 1 or 3 channels (an RGBA result decodes the JPEG in full)."""
    return reduced and None not in size and channels != 4


def raw_mode(image: PILImage.Image) -> str | None:
    """How a not yet loaded image's pixels are stored in its file (Pillow's raw mode, e.g.
    "L;4" for a 4-bit grayscale PNG); None once loaded or when unknown."""
    tile = getattr(image, "tile", None)
    rawmode = tile[0][3] if tile else None
    return rawmode if isinstance(rawmode, str) else None


def _sixteen_bit_colour(image: PILImage.Image) -> bool:
    """Whether a not yet loaded image is a 16-bit colour PNG (Pillow keeps only 8 bits)."""
    return (raw_mode(image) or "").startswith(("RGB;16", "RGBA;16"))


def to_channels(
    image: PILImage.Image, channels: int, fmt: str | None = None, wide: bool = False
) -> PILImage.Image:
    """Converts an image to 1, 3 or 4 channels the way TensorFlow's decoders do.

    16-bit grayscale keeps the high byte (libpng's strip, not Pillow's clip to white); RGB to
    gray uses libpng's weights (PNG) while JPEGs get libjpeg's luma from `prepare`'s draft;
    CMYK uses TensorFlow's formula; transparent GIF pixels become black (with 4 channels the
    GIF keeps its transparency as alpha); an image without alpha gets alpha 255. `fmt` is the
    file format and `wide` says the file was 16-bit colour.

    Raises:
        SchemaError: the conversion TensorFlow would make differs from any Pillow can make
            (16-bit colour PNG to 1 channel) or TensorFlow refuses it (CMYK JPEG to 1 channel).
    """
    mode = _MODE_FOR_CHANNELS[channels]
    if image.mode == mode:
        return image
    if image.mode in SIXTEEN_BIT_GRAY:
        high = np.asarray(image).astype(np.int64).clip(0, 0xFFFF) >> 8
        image = PILImage.fromarray(high.astype(np.uint8), "L")
    elif image.mode == "CMYK":
        if channels == 1:
            raise SchemaError(
                "TensorFlow cannot decode a CMYK JPEG to 1 channel (Image(shape=(..., 1))); "
                "declare 3 channels, or convert the file to RGB or grayscale first"
            )
        cmyk = np.asarray(image).astype(np.uint32)
        rgb = (255 - cmyk[..., 3:]) * (255 - cmyk[..., :3]) // 255
        image = PILImage.fromarray(rgb.astype(np.uint8), "RGB")
    elif fmt == "GIF" and "transparency" in image.info and channels != 4:
        rgba = np.array(image.convert("RGBA"))
        rgba[rgba[..., 3] == 0] = 0
        image = PILImage.fromarray(rgba[..., :3], "RGB")
    elif image.mode in ("P", "PA"):
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode == mode:
        return image
    if channels == 1 and image.mode not in ("1", "L", "LA"):
        if wide:
            raise SchemaError(
                "a 16-bit colour PNG cannot be decoded to 1 channel the same way by TensorFlow "
                "(it converts the 16-bit values) and Pillow (it reads 8 bits); declare 3 "
                "channels, or convert the file to grayscale first"
            )
        rgb = np.asarray(image.convert("RGB"), np.uint32)
        gray = (rgb @ np.array(GRAY_WEIGHTS, np.uint32)) >> 15
        return PILImage.fromarray(gray.astype(np.uint8), "L")
    return image.convert(mode)


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


def header_size(value: Any, upright: bool = True) -> tuple[int, int] | None:
    """`(height, width)` of a path, encoded bytes, a PIL image or an array, from the header
    only; with `upright`, as EXIF orientation turns the image (masks are never turned). None
    when it cannot be told: reading the value itself then names the problem."""
    if isinstance(value, np.ndarray | list):
        shape = np.shape(value)
        return (int(shape[0]), int(shape[1])) if len(shape) >= 2 else None
    try:
        if isinstance(value, PILImage.Image):
            return _header_size(value, upright)
        opened = value if isinstance(value, str | os.PathLike) else io.BytesIO(value)
        with PILImage.open(opened) as image:
            return _header_size(image, upright)
    except Exception:  # unreadable: the feature's own read names it
        return None


def _header_size(image: PILImage.Image, upright: bool) -> tuple[int, int]:
    # The EXIF block read with the header; a PNG's after its pixels (rare) is not read.
    turned = upright and "exif" in image.info and orientation(image) in _TRANSPOSED_ORIENTATIONS
    return (image.width, image.height) if turned else (image.height, image.width)
