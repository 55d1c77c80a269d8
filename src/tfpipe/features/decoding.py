"""Image decoding with TensorFlow: in graphs (tf.data path) and the writer's check of copies.

`decode` gives the pixels `imaging.prepare` gives on the Pillow path, for every image mode:
JPEGs with libjpeg's accurate integer IDCT (Pillow's; TensorFlow's default fast IDCT differs
by up to ~18 levels) and turned upright by their EXIF orientation, and 4 channels without
TensorFlow's low-bit-depth PNG alpha bug.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import simplejpeg
import tensorflow as tf
from PIL import Image as PILImage

from tfpipe.errors import EncodeError, SchemaError
from tfpipe.features import imaging, orientation

JPEG_RATIOS = (8, 4, 2, 1)
_DCT_METHOD = "INTEGER_ACCURATE"
GROUP = 32  # images the write check decodes in one graph call
_HEAD = 30  # bytes that hold PNG's bit depth (byte 24) and BMP's bits per pixel (28-29)
_PALETTE_BMP = (
    "a BMP of 8 bits per pixel or fewer: TensorFlow's decoder ignores its palette and would "
    "give wrong colours; convert it to PNG, or write TFRecords first (the writer uses Pillow)"
)


@dataclasses.dataclass(frozen=True)
class StoredImages:
    """What the writer of a dataset vouches for of the images it stored for one feature, as
    its metadata records it ("stored_images"): their formats, whether every JPEG is upright
    (no EXIF orientation to apply), and their one size when they all have the same. A reader
    then decodes with a graph of those formats only, reads no EXIF, and for upright JPEGs of
    one size picks the DCT scale when tracing (no switch of scales, and no resize when that
    scale lands on the target); data without it gets the full decode.

    Examples:
        >>> stored = StoredImages.from_json({"formats": ["jpeg"], "upright": True})
        >>> stored.jpeg_only, stored.to_json()
        (True, {'formats': ['jpeg'], 'upright': True})
        >>> StoredImages(("jpeg",), True, size=(256, 256)).to_json()["size"]
        [256, 256]

    Attributes:
        formats: the formats stored, a sorted tuple of "jpeg" and "png".
        upright: whether every stored JPEG is upright: `write_tfrecords` copies a JPEG only
            when its EXIF says so, and stores the others turned upright, without EXIF.
        size: (height, width) of every stored image when they all have that size, else None.
    """

    formats: tuple[str, ...]
    upright: bool
    size: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        formats = tuple(self.formats) if isinstance(self.formats, list | tuple) else ()
        if not formats or not set(formats) <= {"jpeg", "png"} or type(self.upright) is not bool:
            raise SchemaError(
                'stored images must list their formats ("jpeg", "png") and say whether '
                f"they are upright. Received: formats={self.formats!r}, upright={self.upright!r}"
            )
        object.__setattr__(self, "formats", tuple(sorted(set(formats))))
        if self.size is not None:
            size = tuple(self.size) if isinstance(self.size, list | tuple) else ()
            if len(size) != 2 or not all(type(side) is int and side > 0 for side in size):
                raise SchemaError(
                    "stored images' size must be [height, width], two positive ints. "
                    f"Received: size={self.size!r}"
                )
            object.__setattr__(self, "size", size)

    @property
    def jpeg_only(self) -> bool:
        """Whether every stored image is a JPEG."""
        return self.formats == ("jpeg",)

    @property
    def fixed_size(self) -> tuple[int, int] | None:
        """The (height, width) every stored image decodes to, upright, when one is known:
        JPEGs only, every one upright, all of one size; else None."""
        return self.size if self.jpeg_only and self.upright else None

    def to_json(self) -> dict[str, Any]:
        """The metadata's entry: {"formats": [...], "upright": ...}, and "size" when known."""
        entry: dict[str, Any] = {"formats": list(self.formats), "upright": self.upright}
        return entry if self.size is None else {**entry, "size": list(self.size)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredImages:
        """The facts a `to_json()` entry holds; SchemaError when it is not one."""
        if not isinstance(data, Mapping) or not (
            {"formats", "upright"} <= set(data) <= {"formats", "upright", "size"}
        ):
            raise SchemaError(
                f"stored images: expected formats, upright and maybe size. Received: {data!r}"
            )
        return cls(data["formats"], data["upright"], data.get("size"))


def _upright(stored: StoredImages | None) -> bool:
    """Whether the JPEGs are known to be upright: their EXIF need not be read."""
    return stored is not None and stored.upright


def _by_format(data: tf.Tensor, stored: StoredImages | None, jpeg: Any, other: Any) -> tf.Tensor:
    """`jpeg()` or `other()` by the format of `data`; only the one the stored formats allow
    when the writer vouched for them (a smaller graph to trace and instantiate)."""
    if stored is not None and stored.jpeg_only:
        return jpeg()
    if stored is not None and "jpeg" not in stored.formats:
        return other()
    return tf.cond(tf.io.is_jpeg(data), jpeg, other)


def decode(
    data: tf.Tensor,
    channels: int,
    turn: tf.Tensor | None = None,
    stored: StoredImages | None = None,
) -> tf.Tensor:
    """Decodes one JPEG, PNG, GIF (first frame) or BMP to uint8 (H, W, channels).

    `turn` is the JPEG's EXIF orientation when computed already (per batch, cheaper);
    `stored`, what the writer vouched for of the images (see `StoredImages`).
    """
    if channels == 4:
        return _decode_rgba(data, turn)
    return _by_format(
        data,
        stored,
        lambda: _decode_jpeg(data, channels, turn, upright=_upright(stored)),
        lambda: _decode_other(data, channels),
    )


def _decode_jpeg(
    data: tf.Tensor, channels: int, turn: tf.Tensor | None, upright: bool = False
) -> tf.Tensor:
    data = _within_pixel_limit(data, _jpeg_pixels(tf.io.extract_jpeg_shape(data)))
    image = tf.io.decode_jpeg(data, channels=channels, dct_method=_DCT_METHOD)
    if upright:
        return image
    return orientation.upright(image, orientation.orientation(data) if turn is None else turn)


def _jpeg_pixels(shape: tf.Tensor) -> tf.Tensor:
    """The pixel count of a JPEG of `extract_jpeg_shape` `shape`, as int64."""
    return tf.reduce_prod(tf.cast(shape[:2], tf.int64))


def _png_size(head: tf.Tensor) -> tf.Tensor:
    """(height, width) as int64 that a PNG's header (`_head`) declares."""
    big = tf.constant([1 << 24, 1 << 16, 1 << 8, 1], tf.int64)
    ints = tf.cast(head, tf.int64)
    return tf.stack([tf.reduce_sum(ints[20:24] * big), tf.reduce_sum(ints[16:20] * big)])


def _png_pixels(head: tf.Tensor) -> tf.Tensor:
    """The pixel count a PNG's header (`_head`) declares as int64; 0 for other formats."""
    return tf.where(_is_png(head), tf.reduce_prod(_png_size(head)), tf.constant(0, tf.int64))


def _within_pixel_limit(data: tf.Tensor, pixels: tf.Tensor) -> tf.Tensor:
    """`data` (one stored image of `pixels` pixels, read from its header), once asserted not
    to exceed Pillow's decompression-bomb limit (`PIL.Image.MAX_IMAGE_PIXELS` when traced),
    as the Pillow paths refuse it (`imaging.check_pixels`), before anything decodes it.

    The assert's data are strings only, so TensorFlow adds no conditional around it (two
    branch functions fewer to trace and instantiate per decode).
    """
    limit = PILImage.MAX_IMAGE_PIXELS
    if limit is None:
        return data
    check = tf.debugging.Assert(
        pixels <= limit,
        [
            f"image exceeds the decompression-bomb limit of {limit / 1e6:.1f} MP "
            "(PIL.Image.MAX_IMAGE_PIXELS); if the file is trusted, raise "
            "PIL.Image.MAX_IMAGE_PIXELS. Pixels:",
            tf.strings.as_string(pixels),
        ],
    )
    with tf.control_dependencies([check]):
        return tf.identity(data)


def _head(data: tf.Tensor) -> tf.Tensor:
    """The first `_HEAD` bytes as uint8, zero-padded (of each image, for a vector)."""
    return tf.io.decode_raw(tf.strings.substr(data + b"\0" * _HEAD, 0, _HEAD), tf.uint8)


def _is_png(head: tf.Tensor) -> tf.Tensor:
    return tf.reduce_all(head[..., :8] == tf.constant(list(imaging.PNG_MAGIC), tf.uint8), -1)


def _is_bmp(head: tf.Tensor) -> tf.Tensor:
    return (head[0] == ord("B")) & (head[1] == ord("M"))


def _without_palette_bmp(data: tf.Tensor, head: tf.Tensor) -> tf.Tensor:
    """`data`, once asserted not to be a palette BMP (which TensorFlow decodes wrongly)."""
    bits = tf.cast(head[28], tf.int32) + 256 * tf.cast(head[29], tf.int32)
    check = tf.debugging.Assert(~(_is_bmp(head) & (bits < 24)), [_PALETTE_BMP])
    with tf.control_dependencies([check]):
        return tf.identity(data)


def _decode_other(data: tf.Tensor, channels: int) -> tf.Tensor:
    """A PNG, GIF or BMP; GIF and BMP decoders give colour only, so gray is computed here."""
    head = _head(data)
    data = _without_palette_bmp(_within_pixel_limit(data, _png_pixels(head)), head)
    if channels == 3:
        return tf.io.decode_image(data, channels=3, expand_animations=False)
    return tf.cond(
        _is_png(head),
        lambda: tf.io.decode_image(data, channels=1, expand_animations=False),
        lambda: _gray(tf.io.decode_image(data, channels=3, expand_animations=False)),
    )


def _gray(rgb: tf.Tensor) -> tf.Tensor:
    """libpng's RGB to gray, `(9797 R + 19234 G + 3737 B) >> 15`."""
    weighted = tf.cast(rgb, tf.int32) * tf.constant(imaging.GRAY_WEIGHTS, tf.int32)
    return tf.cast(tf.bitwise.right_shift(tf.reduce_sum(weighted, -1, keepdims=True), 15), tf.uint8)


def _decode_rgba(data: tf.Tensor, turn: tf.Tensor | None) -> tf.Tensor:
    """RGBA; alpha 255 where the file has none.

    TensorFlow's own channels=4 fills the alpha of a 1, 2 or 4-bit PNG (palette or grayscale)
    with the bit depth's maximum (1 or 3, not 255), reads the unused 4th byte of a 32-bit BMP
    as alpha, and refuses JPEGs.
    """
    head = _head(data)
    data = _without_palette_bmp(_within_pixel_limit(data, _png_pixels(head)), head)
    return tf.case(
        [
            (tf.io.is_jpeg(data), lambda: _with_alpha(_decode_jpeg(data, 3, turn))),
            (_is_png(head) & (head[24] < 8), lambda: _with_alpha(tf.io.decode_png(data, 0))),
            (_is_bmp(head), lambda: _with_alpha(tf.io.decode_bmp(data, channels=3))),
        ],
        default=lambda: tf.io.decode_image(data, channels=4, expand_animations=False),
        exclusive=True,
    )


def _with_alpha(image: tf.Tensor) -> tf.Tensor:
    """An image of 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 channels as RGBA."""
    depth = tf.shape(image)[-1]
    colour = tf.cond(
        depth < 3, lambda: tf.repeat(image[..., :1], 3, axis=-1), lambda: image[..., :3]
    )
    opaque = tf.fill(tf.shape(image[..., :1]), tf.constant(255, tf.uint8))
    alpha = tf.cond(depth % 2 == 0, lambda: image[..., -1:], lambda: opaque)
    return tf.concat([colour, alpha], axis=-1)


def decode_reduced(
    data: tf.Tensor,
    channels: int,
    size: tuple[int, int],
    turn: tf.Tensor | None = None,
    stored: StoredImages | None = None,
) -> tf.Tensor:
    """`decode` for 1 or 3 channels, a JPEG at the DCT scale `decode_jpeg_reduced` picks (the
    scale Pillow's draft mode picks on the Pillow path); other formats in full. Upright JPEGs
    of one size (`StoredImages.fixed_size`) are decoded at the scale that size gets, picked
    now, with the decoded size static where no block means follow (`resize_and_scale` then
    leaves out what would not change a pixel)."""
    fixed = None if stored is None else stored.fixed_size
    if fixed is not None:
        return _decode_jpeg_fixed(data, channels, size, fixed)
    return _by_format(
        data,
        stored,
        lambda: decode_jpeg_reduced(data, channels, size, turn, upright=_upright(stored)),
        lambda: _decode_other(data, channels),
    )


def decode_jpeg_reduced(
    data: tf.Tensor,
    channels: int,
    size: tuple[int, int],
    turn: tf.Tensor | None = None,
    upright: bool = False,
) -> tf.Tensor:
    """Decodes a JPEG at the smallest DCT scale that still covers `size`, then turns it upright
    (`turn`: its EXIF orientation, when computed already; `upright`: known to need no turn)."""
    if upright:
        turn, target = None, tf.constant(size)
    else:  # turned by 5-8: stored as (width, height)
        turn = orientation.orientation(data) if turn is None else turn
        target = tf.where(turn >= 5, tf.constant(size[::-1]), tf.constant(size))
    stored = tf.io.extract_jpeg_shape(data)
    data = _within_pixel_limit(data, _jpeg_pixels(stored))
    scale = tf.reduce_min(tf.cast(stored[:2], tf.float32) / tf.cast(target, tf.float32))
    # The ratio is the largest of JPEG_RATIOS not above `scale` (`jpeg_ratio` for known sizes).
    branch = tf.reduce_sum(tf.cast(scale < tf.constant(JPEG_RATIOS, tf.float32), tf.int32))
    branches = [
        (lambda r=r: tf.io.decode_jpeg(data, channels=channels, ratio=r, dct_method=_DCT_METHOD))
        for r in JPEG_RATIOS
    ]
    image = tf.switch_case(tf.minimum(branch, len(JPEG_RATIOS) - 1), branches)
    return image if turn is None else orientation.upright(image, turn)


def jpeg_ratio(stored: tuple[int, int], size: tuple[int, int]) -> int:
    """The DCT scale `decode_jpeg_reduced` picks for a JPEG of `stored` (height, width) and a
    target `size`, computed as its graph does (float32).

    Examples:
        >>> jpeg_ratio((256, 256), (128, 128)), jpeg_ratio((300, 200), (128, 128))
        (2, 1)
    """
    scale = np.min(np.array(stored, np.float32) / np.array(size, np.float32))
    branch = int(np.sum(scale < np.array(JPEG_RATIOS, np.float32)))
    return JPEG_RATIOS[min(branch, len(JPEG_RATIOS) - 1)]


def _decode_jpeg_fixed(
    data: tf.Tensor, channels: int, size: tuple[int, int], stored: tuple[int, int]
) -> tf.Tensor:
    """An upright JPEG that its writer noted to be of `stored` (height, width), at the DCT
    scale `decode_jpeg_reduced` picks for it (`jpeg_ratio`): one decode, no switch.

    Asserted to be of that size (the pixel-limit check then needs no graph when that size is
    within it). The decoded size (libjpeg's, `ceil(side / ratio)`) is set as the static
    shape where no side reaches twice the target, so that `resize_and_scale` leaves out the
    block means and, when it is the target, the bilinear resize.
    """
    ratio = jpeg_ratio(stored, size)
    shape = tf.io.extract_jpeg_shape(data)[:2]
    check = tf.debugging.Assert(
        tf.reduce_all(tf.equal(shape, stored)),
        [
            f"a JPEG is not of the size {stored} the records' metadata (stored_images) gives; "
            "write the records again with tfpipe.write_tfrecords. Size:",
            tf.strings.as_string(shape),
        ],
    )
    with tf.control_dependencies([check]):
        data = tf.identity(data)
    limit = PILImage.MAX_IMAGE_PIXELS
    if limit is not None and stored[0] * stored[1] > limit:
        data = _within_pixel_limit(data, _jpeg_pixels(shape))
    image = tf.io.decode_jpeg(data, channels=channels, ratio=ratio, dct_method=_DCT_METHOD)
    decoded = tuple(-(-side // ratio) for side in stored)
    if all(side < 2 * target for side, target in zip(decoded, size, strict=True)):
        return tf.ensure_shape(image, (*decoded, channels))
    return image


def jpeg_warning(data: bytes) -> str | None:
    """What libjpeg warns of while decoding a JPEG ("Corrupt JPEG data: bad Huffman code"),
    None when it decodes cleanly.

    TensorFlow and Pillow both decode past such warnings (a garbage body gives noise pixels);
    simplejpeg's strict mode raises on them. Decoded at 1/8 scale: every entropy-coded block is
    still read.

    Examples:
        >>> data = tf.io.encode_jpeg(tf.zeros((8, 8, 3), tf.uint8)).numpy()
        >>> jpeg_warning(data) is None
        True
    """
    try:
        colour = simplejpeg.decode_jpeg_header(data)[2]
        space = "cmyk" if colour in ("CMYK", "YCCK") else "rgb"
        simplejpeg.decode_jpeg(data, colorspace=space, min_factor=8, strict=True)
    except ValueError as e:
        return str(e)
    return None


def stored_size(data: tf.Tensor, turn: tf.Tensor | None = None) -> tf.Tensor:
    """(height, width) as int64 of one stored JPEG (upright by its EXIF orientation `turn`,
    read here when None) or PNG, from its header only; (-1, -1) for other formats."""
    head = _head(data)

    def jpeg() -> tf.Tensor:
        size = tf.cast(tf.io.extract_jpeg_shape(data)[:2], tf.int64)
        turned = (orientation.orientation(data) if turn is None else turn) >= 5
        return tf.where(turned, size[::-1], size)

    return tf.case(
        [(tf.io.is_jpeg(data), jpeg), (_is_png(head), lambda: _png_size(head))],
        default=lambda: tf.constant([-1, -1], tf.int64),
        exclusive=True,
    )


def check_decodes(data: bytes, fmt: str) -> None:
    """Raises EncodeError when TensorFlow's decoder would refuse a JPEG or PNG at training time,
    or libjpeg warns of corrupt JPEG data that TensorFlow would decode to noise.

    A JPEG is decoded at 1/8 scale: libjpeg still reads every entropy-coded block, so this
    rejects what a full decode rejects (checked on mutated files), in about 2/3 of the
    time. Pillow is not enough: it ignores libjpeg's "corrupt data" warnings, and TensorFlow
    ignores some (`jpeg_warning`). A PNG is decoded in full (libpng checks every chunk's CRC).

    Inside `deferred_checks()` (on this thread), the decode is only collected, for one
    `all_decode` call over many images; inside `unchecked_copies()` it is not done at all. The
    size check stays here in every case.
    """
    size = imaging.image_size(data)
    if size is not None:
        imaging.check_pixels(*size)
    if not _CHECK_COPIES.get():
        return
    warning = jpeg_warning(data) if fmt == "jpeg" else None
    if warning is not None:
        raise EncodeError(
            f"corrupt JPEG: libjpeg reports {warning!r}; TensorFlow would decode it to "
            "damaged pixels and train on them; re-encode or remove the file"
        )
    pending = _PENDING.get()
    if pending is not None:
        pending.append((data, fmt))
        return
    try:
        if fmt == "jpeg":
            tf.io.decode_jpeg(data, ratio=8)
        else:
            tf.io.decode_png(data)
    except tf.errors.InvalidArgumentError as e:
        reason = e.message.split("}} ")[-1].split(" [Op:")[0].strip()
        raise EncodeError(
            f"corrupt {fmt.upper()}: TensorFlow's decoder rejects it ({reason}), so training "
            "would fail on it; re-encode or remove the file"
        ) from e


Check = tuple[bytes, str]
_PENDING: contextvars.ContextVar[list[Check] | None] = contextvars.ContextVar(
    "tfpipe_pending_checks", default=None
)


_CHECK_COPIES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tfpipe_check_copies", default=True
)


@contextlib.contextmanager
def unchecked_copies() -> Iterator[None]:
    """Within (on this thread), `check_decodes` checks the pixel count only, not the decode."""
    token = _CHECK_COPIES.set(False)
    try:
        yield
    finally:
        _CHECK_COPIES.reset(token)


@dataclasses.dataclass
class Noted:
    """What a writer stored of one Image feature so far: the formats, and the sizes (height,
    width), of which two are enough to say there is no one size."""

    formats: set[str] = dataclasses.field(default_factory=set)
    sizes: set[tuple[int, int]] = dataclasses.field(default_factory=set)

    def add(self, fmt: str, size: tuple[int, int] | None) -> None:
        """Notes one image of format `fmt` and `size` (None: unknown, so no one size)."""
        self.formats.add(fmt)
        if len(self.sizes) < 2:
            self.sizes.add((0, 0) if size is None else size)

    @property
    def size(self) -> tuple[int, int] | None:
        """The one size of every image noted, else None."""
        return next(iter(self.sizes)) if len(self.sizes) == 1 and (0, 0) not in self.sizes else None


_FORMATS: contextvars.ContextVar[dict[int, Noted] | None] = contextvars.ContextVar(
    "tfpipe_stored_formats", default=None
)


@contextlib.contextmanager
def noting_formats(seen: dict[int, Noted]) -> Iterator[None]:
    """Within (on this thread), `note_format` adds to `seen` the format and size of each image
    stored, under the id of its feature (threads may share one `seen`: set.add holds the GIL,
    and a third size noted by a race changes nothing)."""
    token = _FORMATS.set(seen)
    try:
        yield
    finally:
        _FORMATS.reset(token)


def note_format(feature: object, fmt: str, size: tuple[int, int] | None) -> None:
    """Notes that an image of `feature` is stored as `fmt` of `size` (height, width; None when
    not known), inside `noting_formats`."""
    seen = _FORMATS.get()
    if seen is not None:
        seen.setdefault(id(feature), Noted()).add(fmt, size)


@contextlib.contextmanager
def deferred_checks() -> Iterator[list[Check]]:
    """Collects the (bytes, format) of the images `check_decodes` sees here, unchecked."""
    pending: list[Check] = []
    token = _PENDING.set(pending)
    try:
        yield pending
    finally:
        _PENDING.reset(token)


def decodes(data: bytes, fmt: str) -> bool:
    """Whether `check_decodes` accepts one image (eager: one op call)."""
    try:
        check_decodes(data, fmt)
        return True
    except EncodeError:
        return False


def all_decode(checks: list[Check]) -> bool:
    """Whether every image is accepted, decoded as `check_decodes` does, `GROUP` per graph call.

    The decodes of a call run side by side on TensorFlow's threads, without the GIL. A
    rejected image fails its whole call, so False says only that some image is bad: `decodes`
    finds which.
    """
    for start in range(0, len(checks), GROUP):
        group = checks[start : start + GROUP]
        group += group[:1] * (GROUP - len(group))  # one graph for every call: pad with a copy
        try:
            _decode_group(
                tf.constant([data for data, _ in group]),
                tf.constant([fmt == "jpeg" for _, fmt in group]),
            )
        except tf.errors.OpError:  # any failure: `decodes` gives each image's own verdict
            return False
    return True


@functools.cache
def warm_up() -> None:
    """Builds the graph of `all_decode` (~0.6 s of CPU, once per process), e.g. before timing it."""
    all_decode([(tf.io.encode_jpeg(tf.zeros((8, 8, 3), tf.uint8)).numpy(), "jpeg")])


def _rows(data: tf.Tensor, jpeg: tf.Tensor) -> tf.Tensor:
    """The decoded height of one image: an output that needs the whole decode."""
    image = tf.cond(jpeg, lambda: tf.io.decode_jpeg(data, ratio=8), lambda: tf.io.decode_png(data))
    return tf.shape(image)[0]


@tf.function(input_signature=[tf.TensorSpec([GROUP], tf.string), tf.TensorSpec([GROUP], tf.bool)])
def _decode_group(data: tf.Tensor, jpeg: tf.Tensor) -> tf.Tensor:
    # Unrolled: independent ops, no loop; tf.map_fn took 120 µs per 256x256 JPEG, this 104.
    return tf.stack([_rows(data[i], jpeg[i]) for i in range(GROUP)])


_GRAY = 0  # the PNG colour type of grayscale without alpha (byte 25 of the file)
_BITS = {"uint8": 8, "uint16": 16}


def gray_png_problem(data: bytes, dtype: str) -> str | None:
    """Why stored mask bytes are not a grayscale PNG of `dtype`'s bits; None when they are.

    TensorFlow's PNG decoder would give colours for a palette PNG, scale 16-bit values to 8
    bits (or the reverse), and decode a JPEG as well: the values would not be the classes.
    """
    bits = _BITS[dtype]
    if not data.startswith(imaging.PNG_MAGIC) or len(data) < 26:
        found = (imaging.sniff_format(data) or "unknown").upper()
        return f"a mask must be stored as a grayscale PNG, found {found} data"
    if data[25] != _GRAY or data[24] != bits:
        return (
            f"a mask must be stored as a {bits}-bit grayscale PNG (as write_tfrecords stores "
            f"{dtype} masks), found PNG colour type {data[25]} of {data[24]} bits, which "
            "TensorFlow would not decode to the stored values; write the records with "
            "tfpipe.write_tfrecords"
        )
    return None


def check_gray_png(data: tf.Tensor, dtype: str) -> tf.Tensor:
    """`data` (one stored mask or a vector of them), once asserted to be grayscale PNGs of
    `dtype`'s bits: TensorFlow's PNG decoder would give other values for anything else (see
    `gray_png_problem`)."""
    head = _head(data)
    bits = _BITS[dtype]
    gray = _is_png(head) & tf.equal(head[..., 25], _GRAY) & tf.equal(head[..., 24], bits)
    check = tf.debugging.Assert(
        tf.reduce_all(gray),
        [f"a mask must be stored as a {bits}-bit grayscale PNG; `tfpipe verify` names the record"],
    )
    with tf.control_dependencies([check]):
        return tf.identity(data)
