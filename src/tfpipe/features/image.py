"""`Image`: JPEG, PNG or raw pixels, decoded to uint8 on the numpy and tf.data paths."""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf
from PIL import Image as PILImage

from tfpipe.errors import DecodeError, SchemaError, SourceError
from tfpipe.features import decoding, imaging, orientation
from tfpipe.features.base import Feature, tfds_image, tfds_shape, tfds_tensor


@dataclasses.dataclass(frozen=True)
class Image(Feature):
    """An image stored as JPEG, PNG or raw uint8 pixels; decoded to uint8 (H, W, C).

    `encode` accepts a file path, encoded bytes, a `PIL.Image` or a uint8 array. A JPEG (or PNG)
    that already has the stored format, size and channels is stored byte for byte, once
    TensorFlow's decoder has accepted it (a corrupt file raises `EncodeError`); anything
    else is converted to the declared channels (EXIF orientation applied), resized to the
    declared height and width when they are given, and encoded in the stored format. The
    stored format is `encoding`; with "auto" it is each image's own: a JPEG stays JPEG, a
    PNG stays PNG, and anything else (BMP, GIF, arrays, RGBA from a JPEG) is stored as PNG,
    losslessly. Decoding reads JPEG and PNG bytes whatever `encoding` says. `load` (Pillow)
    and `decode_tensor` (TensorFlow) give the same pixels for every image mode (16-bit,
    palette, CMYK, ...; the table is in docs/reliability.md), or both refuse the image.

    Examples:
        >>> feature = tfpipe.Image(shape=(128, 128, 3), encoding="jpeg")
        >>> feature.load(np.zeros((256, 256, 3), np.uint8)).shape
        (128, 128, 3)

    Args:
        shape: `(height, width, channels)`; height and width may be None for variable sizes.
            Channels is 1, 3 or 4. Defaults to `(None, None, 3)`.
        encoding: "jpeg", "png", "raw", or "auto" (each image in its own format, as above;
            what `from_directory` and `from_dataframe` infer for image files). Defaults to
            "jpeg".
        quality: JPEG quality when an image has to be encoded as JPEG. Defaults to 95.
        storage: what the writer of the records vouched for of the stored images (their
            formats, and that every JPEG is upright), which lets the decode leave out the
            other formats and the EXIF read. `write_tfrecords` records it in the metadata
            ("stored_images"), and a reader takes it from the metadata of the records it reads
            only, never from a schema given by hand; not part of the feature's JSON, nor of
            its equality. Defaults to None (any format, the EXIF orientation read).
    """

    kind: ClassVar[str] = "image"
    tfds_kinds: ClassVar[tuple[str, ...]] = ("image",)
    shape: tuple[int | None, int | None, int] = (None, None, 3)
    encoding: str = "jpeg"
    quality: int = 95
    storage: decoding.StoredImages | None = dataclasses.field(
        default=None, compare=False, repr=False, metadata={"json": False}
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        if len(self.shape) != 3 or self.shape[2] not in (1, 3, 4):
            raise SchemaError(
                f"Image.shape must be (height, width, channels) with 1, 3 or 4 channels. "
                f"Received: shape={self.shape}"
            )
        for dim in self.shape[:2]:
            if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0):
                raise SchemaError(
                    f"Image.shape height and width must be positive ints or None. "
                    f"Received: shape={self.shape}"
                )
        if self.encoding not in ("jpeg", "png", "raw", "auto"):
            raise SchemaError(
                "Image.encoding must be 'jpeg', 'png', 'raw' or 'auto'. "
                f"Received: encoding={self.encoding!r}"
            )
        if self.encoding == "raw" and None in self.shape:
            raise SchemaError(
                "Image(encoding='raw') needs a fixed height and width. "
                f"Received: shape={self.shape}"
            )
        if self.encoding == "jpeg" and self.shape[2] == 4:
            raise SchemaError("JPEG cannot store 4 channels: use encoding='png' for RGBA images")
        if not 1 <= self.quality <= 100:
            raise SchemaError(f"Image.quality must be in 1..100. Received: quality={self.quality}")
        if self.storage is not None and not isinstance(self.storage, decoding.StoredImages):
            raise SchemaError(
                f"Image.storage must be a StoredImages or None. Received: storage={self.storage!r}"
            )

    def as_written(
        self, formats: Collection[str] = (), size: tuple[int, int] | None = None
    ) -> Image:
        """This feature with `storage` saying what `write_tfrecords` stored for it: every JPEG
        upright, in `formats` (those the writer noted), else in those `encoding` allows ("auto"
        keeps a JPEG's own format and stores the rest as PNG), and of `size` (height, width)
        when the writer noted that every image has it. Raw pixels have no `storage`.

        Examples:
            >>> tfpipe.Image(encoding="auto").as_written().storage
            StoredImages(formats=('jpeg', 'png'), upright=True, size=None)
            >>> tfpipe.Image(encoding="auto").as_written({"jpeg"}, (256, 256)).storage.size
            (256, 256)
        """
        if self.encoding == "raw":
            return dataclasses.replace(self, storage=None)
        allowed = {self._stored_format(found) for found in ("jpeg", "png", None)}
        stored = tuple(formats) if formats else tuple(allowed)
        return dataclasses.replace(self, storage=decoding.StoredImages(stored, True, size))

    @classmethod
    def _from_tfds(
        cls, kind: str, spec: Mapping[str, Any], class_names: Callable[[], list[str] | None]
    ) -> Feature:
        if spec.get("dtype", "uint8") != "uint8":
            raise ValueError(f"its images are {spec['dtype']}, and tfpipe reads uint8 images")
        # TFDS stores a file as it came when no format is given, as "auto" does
        return cls(shape=tfds_shape(spec), encoding=spec.get("encodingFormat") or "auto")  # type: ignore[arg-type]

    def tfds_json(self) -> dict[str, Any]:
        if self.encoding == "raw":
            return tfds_tensor(self.shape, "uint8", "bytes")
        return tfds_image(self.shape, "uint8", None if self.encoding == "auto" else self.encoding)

    @property
    def channels(self) -> int:
        """The channels of the decoded image: 1, 3 or 4.

        Examples:
            >>> tfpipe.Image(shape=(None, None, 1), encoding="png").channels
            1
        """
        return int(self.shape[2])

    @property
    def dtype(self) -> str:
        return "uint8"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return self.shape

    @property
    def encoded_image(self) -> bool:
        return self.encoding != "raw"

    @property
    def inferred_because(self) -> str:
        found = "JPEG and PNG" if self.encoding == "auto" else self.encoding.upper()
        return f"its bytes are {found} images"

    def check_stored(self, value: Any) -> None:
        del value  # decoding is an image's check: `verify` decodes them all in one graph

    def parse_spec(self) -> tf.io.FixedLenFeature | tf.io.RaggedFeature:
        return tf.io.FixedLenFeature([], tf.string)

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        proto.bytes_list.value.append(self.encode_bytes(value))

    def encode_bytes(self, value: Any) -> bytes:
        """The bytes stored for a value: copied when possible, otherwise encoded.

        Examples:
            >>> data = tfpipe.Image(encoding="png").encode_bytes(np.zeros((4, 4, 3), np.uint8))
            >>> data[:4]
            b'\\x89PNG'
        """
        if self.encoding == "raw":
            return self.load(value).tobytes()
        data = imaging.read_bytes(value)
        found = None if data is None else imaging.sniff_format(data)
        fmt = self._stored_format(found)
        if (
            data is not None
            and found == fmt
            and imaging.copyable(data, fmt, self.shape[:2], self.channels)
        ):
            decoding.check_decodes(data, fmt)
            header = imaging.image_size(data)  # copied: upright, so (width, height) as decoded
            size = None if header is None else (header[1], header[0])
        else:
            image = self._prepare(value if data is None else data, self.shape[:2])
            data = imaging.encode_image(image, fmt, self.quality)
            size = (image.height, image.width)
        decoding.note_format(self, fmt, size)
        return data

    def _stored_format(self, found: str | None) -> str:
        """The format an image of format `found` ("jpeg", "png", or None for anything else) is
        stored in: `encoding`, or with "auto" a JPEG's own, else PNG (lossless; and JPEG has
        no alpha for 4 channels)."""
        if self.encoding != "auto":
            return self.encoding
        return "jpeg" if found == "jpeg" and self.channels != 4 else "png"

    def load(
        self, value: Any, size: tuple[int, int] | None = None, reduced: bool = True
    ) -> np.ndarray:
        """Decodes to uint8 (H, W, C), resized to `size` or else to the declared size, with the
        pixels `decode_tensor` gives (`reduced`: as there).

        Examples:
            >>> image = tfpipe.Image().load("images/circle/circle_00000.jpg", size=(16, 16))
            >>> image.shape, image.dtype
            ((16, 16, 3), dtype('uint8'))
        """
        target = size if size is not None else self.shape[:2]
        if isinstance(value, np.ndarray) and value.shape == (*target, self.channels):
            if value.dtype != np.uint8:
                raise TypeError(f"expected a uint8 image array, got dtype {value.dtype}")
            return value
        return imaging.as_array(self._prepare(value, target, reduced))

    def array_column(self, name: str, array: np.ndarray) -> np.ndarray:
        if array.dtype != np.uint8:
            raise SourceError(
                f"{name}: Pipeline reads images from arrays as uint8 pixels, got dtype "
                f"{array.dtype}; write them with tfpipe.write_tfrecords first"
            )
        return array[..., np.newaxis] if array.ndim == 3 else array

    def load_batch(
        self,
        values: Sequence[Any],
        size: tuple[int, int],
        reduced: bool = True,
        rescale: float | None = None,
    ) -> np.ndarray | None:
        """Decodes stored JPEGs and PNGs to uint8 (B, H, W, C) in one TensorFlow graph call,
        or to float32 multiplied by `rescale` when it is given.

        The pixels are `decode_tensor`'s, the Pipeline's own. The graph releases the GIL
        and decodes the images in parallel, where `load` decodes one at a time with Pillow,
        holding a Python thread. The array is TensorFlow's own buffer (64-byte aligned, so
        `tf.data.Dataset.from_generator` takes it without a copy). None when a value is not
        the bytes (or path) of a JPEG or PNG, cannot be read, or the graph refuses one: `load`
        each value then, which names the faulty one.

        Examples:
            >>> data = open("images/circle/circle_00000.jpg", "rb").read()
            >>> tfpipe.Image().load_batch([data, data], size=(16, 16)).shape
            (2, 16, 16, 3)
            >>> tfpipe.Image().load_batch([data], size=(16, 16), rescale=1 / 255).dtype
            dtype('float32')
        """
        if self.encoding == "raw":
            return None
        stored = []
        for value in values:
            try:
                data = None if isinstance(value, np.ndarray) else imaging.read_bytes(value)
            except OSError:  # `load` names the file
                return None
            if data is None or imaging.sniff_format(data) is None:
                return None
            stored.append(data)
        try:
            decoder = _batch_decoder(self, (int(size[0]), int(size[1])), reduced, rescale)
            # `_numpy()`: the tensor's own buffer, writable; `.numpy()` copies it (12.6 MB per
            # batch of 64 float32 128x128 images), `np.asarray` gives it read-only.
            return decoder(tf.constant(stored))._numpy()
        except tf.errors.OpError:
            return None

    def _prepare(
        self, value: Any, size: tuple[int | None, int | None], reduced: bool = True
    ) -> Any:
        """The value as a decoded PIL image with the declared channels, resized to `size`."""
        image = imaging.open_image(value)
        try:
            return imaging.prepare(image, self.channels, size, reduced)
        except (OSError, SyntaxError) as e:  # Pillow raises SyntaxError for broken PNG chunks
            raise OSError(f"cannot decode image: {e}") from e

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.bytes_list.value
        if len(values) != 1:
            raise DecodeError(f"expected one bytes value, found {len(values)}")
        if self.encoding != "raw":
            return values[0]
        pixels = np.frombuffer(values[0], np.uint8)
        needed = math.prod(d for d in self.shape if d is not None)
        if pixels.size != needed:
            raise DecodeError(
                f"raw image has {pixels.size} bytes, shape {self.shape} needs {needed}"
            )
        return pixels.reshape(self.shape)

    def decode_tensor(
        self,
        parsed: tf.Tensor,
        size: tuple[int, int] | None = None,
        reduced: bool = True,
        rescale: float | None = None,
        orientation: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """Decodes one stored image in a graph to (H, W, C), resized to `size`.

        The result is uint8, or float32 multiplied by `rescale` when it is given. The pixels
        are those `load` (Pillow) gives, within 1/255: with `reduced` (the default), a JPEG at
        least twice the target in both sides is decoded at the smallest DCT scale (1/2, 1/4 or
        1/8) that still covers it, then resized by `resize_and_scale`; `reduced=False` decodes
        in full (slower, finer). JPEGs are turned upright by their EXIF orientation, as `load`
        turns them; pass `orientation` when it was read already (`orientations` of a batch: a
        few ops for the whole batch, where reading it per image costs about a fifth of a
        256x256 decode).

        Examples:
            >>> data = open("images/circle/circle_00000.jpg", "rb").read()
            >>> image = tfpipe.Image().decode_tensor(tf.constant(data), (16, 16), rescale=1 / 255)
            >>> image.shape, image.dtype
            (TensorShape([16, 16, 3]), tf.float32)
        """
        size = self._resize_to(size)
        if self.encoding == "raw":
            image = tf.reshape(tf.io.decode_raw(parsed, tf.uint8), self.shape)
        elif size is not None and imaging.reduces_jpeg(reduced, self.channels, size):
            image = decoding.decode_reduced(
                parsed, self.channels, size, orientation, stored=self.storage
            )
        else:
            image = decoding.decode(parsed, self.channels, orientation, stored=self.storage)
        image.set_shape((None, None, self.channels) if size else self.shape)
        return resize_and_scale(image, size, rescale)

    def orientations(self, parsed: tf.Tensor) -> tf.Tensor | None:
        """The EXIF orientation of each of a vector of stored images, for `decode_tensor`;
        None when the images are raw pixels (no EXIF) or their writer stored them upright
        (`storage`).

        Examples:
            >>> data = open("images/circle/circle_00000.jpg", "rb").read()
            >>> tfpipe.Image().orientations(tf.constant([data, data])).numpy()  # 1: upright
            array([1, 1], dtype=int32)
        """
        return orientation.orientation(parsed) if self.reads_orientation else None

    @property
    def reads_orientation(self) -> bool:
        """Whether decoding reads the images' EXIF orientation: not for raw pixels, nor for
        JPEGs their writer vouched are upright (`storage`).

        Examples:
            >>> tfpipe.Image().reads_orientation, tfpipe.Image().as_written().reads_orientation
            (True, False)
        """
        return self.encoding != "raw" and not (self.storage is not None and self.storage.upright)

    def _resize_to(self, size: tuple[int, int] | None) -> tuple[int, int] | None:
        """`size`, or None when the images are stored at that size already."""
        if size is None or tuple(size) == self.shape[:2]:
            return None
        return size

    def decode_batch(
        self,
        parsed: tf.Tensor,
        size: tuple[int, int] | None = None,
        reduced: bool = True,
        rescale: float | None = None,
    ) -> tf.Tensor:
        """Decodes a vector of stored images to (B, H, W, C), like `decode_tensor` per image.

        Raw pixels are decoded for the whole batch in one vectorised op; JPEG and PNG one
        image at a time, since TensorFlow has no batched image decoder: every image's decode
        is started at once on TensorFlow's inter-op threads, each on one thread, as a
        parallel tf.data map runs them (`tf.raw_ops.MapDefun`). A `tf.map_fn` ran each
        resize and cast over the intra-op threads as well, whose hand-offs and spinning cost
        up to 0.4 ms of CPU per photo on a busy 2-core machine, more on a quiet one
        (docs/performance.md, "The Sequence path's decode").

        Examples:
            >>> data = open("images/circle/circle_00000.jpg", "rb").read()
            >>> tfpipe.Image(shape=(32, 32, 3)).decode_batch(tf.constant([data, data])).shape
            TensorShape([2, 32, 32, 3])
        """
        if self.encoding == "raw":
            images = tf.reshape(tf.io.decode_raw(parsed, tf.uint8), (-1, *self.shape))
            return resize_and_scale(images, self._resize_to(size), rescale)
        target = size or self.shape[:2]
        turns = self.orientations(parsed)  # for the whole batch at once: cheaper
        columns = [parsed] if turns is None else [parsed, turns]

        def decode(data: tf.Tensor, *turn: tf.Tensor) -> tf.Tensor:
            turned = turn[0] if turn else None
            return self.decode_tensor(data, size, reduced, rescale, orientation=turned)

        one = tf.function(
            decode,
            input_signature=[tf.TensorSpec([], column.dtype) for column in columns],
            autograph=False,
        ).get_concrete_function()
        (images,) = tf.raw_ops.MapDefun(
            arguments=columns,
            captured_inputs=one.captured_inputs,
            output_types=[tf.uint8 if rescale is None else tf.float32],
            output_shapes=[(*target, self.channels)],
            f=one,
            max_intra_op_parallelism=1,
        )
        return images


_DECODERS = threading.Lock()


def _batch_decoder(
    feature: Image, size: tuple[int, int], reduced: bool, rescale: float | None
) -> tf.types.experimental.PolymorphicFunction:
    """The graph `Image.load_batch` calls, traced once per feature (and its `storage` facts,
    which its equality leaves out), size, DCT rule, rescale and Pillow pixel limit, which the
    graph holds as it was when traced (the loader's worker threads ask for it together)."""
    with _DECODERS:
        key = (PILImage.MAX_IMAGE_PIXELS, feature.storage)
        return _new_batch_decoder(feature, (size, reduced, rescale), key)


@functools.lru_cache(maxsize=32)
def _new_batch_decoder(
    feature: Image,
    decode: tuple[tuple[int, int], bool, float | None],
    key: tuple[Any, ...],
) -> tf.types.experimental.PolymorphicFunction:
    del key  # a key only: the limit `decode_tensor` reads while traced, the `storage` facts
    size, reduced, rescale = decode
    decoder = tf.function(
        lambda data: feature.decode_batch(data, size, reduced, rescale),
        input_signature=[tf.TensorSpec([None], tf.string)],
        autograph=False,  # plain TensorFlow code: converting it took ~5 of ~6 s of tracing
    )
    # Traced here, once, under `_batch_decoder`'s lock: threads that call a new function
    # together each trace it (Grain's reading threads traced it 6 times at once, and TensorFlow
    # warned of "excessive" retracing).
    decoder.get_concrete_function()
    return decoder


def scale_label(images: Mapping[str, Image], size: tuple[int, int]) -> str:
    """How `explain()` names the reduced JPEG decode of `images` (by name) to `size`: the one
    DCT scale of those the metadata gives one size for (`StoredImages.fixed_size`).

    Examples:
        >>> scale_label({"image": tfpipe.Image().as_written({"jpeg"}, (256, 256))}, (128, 128))
        'reduced DCT-scale JPEG decode (image: all 256x256, says the metadata: 1/2 scale)'
    """
    known = []
    for name, feature in images.items():
        fixed = None if feature.storage is None else feature.storage.fixed_size
        if fixed is not None:
            ratio = decoding.jpeg_ratio(fixed, size)
            known.append(f"{name}: all {fixed[0]}x{fixed[1]}, says the metadata: 1/{ratio} scale")
    return "reduced DCT-scale JPEG decode" + (f" ({'; '.join(known)})" if known else "")


def resize_and_scale(
    images: tf.Tensor, size: tuple[int, int] | None, rescale: float | None
) -> tf.Tensor:
    """tfpipe's one resize of uint8 image(s) to `size` (None: as they are), then uint8 again,
    or float32 times `rescale` when it is given.

    The pixels are those of `imaging.resize` on the Pillow path (SequenceLoader, the writer):
    the means of k x k blocks (`box_reduce`) where a side is at least twice the target, then
    bilinear interpolation rounded down. Where the images' static height and width are the
    target, there is nothing to resize (bilinear interpolation at the same size gives every
    pixel back): they are only cast.
    """
    if size is not None and tuple(images.shape[-3:-1]) == tuple(size):
        size = None
    if size is not None:
        images = tf.floor(tf.image.resize(box_reduce(images, size), size))
        if rescale is None:
            return tf.saturate_cast(images, tf.uint8)
    elif rescale is not None:
        images = tf.cast(images, tf.float32)
    return images if rescale is None else images * rescale


def box_reduce(images: tf.Tensor, size: tuple[int, int]) -> tf.Tensor:
    """`imaging.box_reduce` in TensorFlow, as float32: the means of k x k blocks of uint8
    image(s), where k is a side's whole shrink from twice its target on, rounded as Pillow's
    `reduce` rounds; the pixels left over cut evenly from both ends. Images of a static height
    and width under twice the target are only cast (no conditional in the graph)."""
    known = images.shape[-3:-1]
    if known.is_fully_defined() and all(n < 2 * t for n, t in zip(known, size, strict=True)):
        return tf.cast(images, tf.float32)
    stored = tf.shape(images)[-3:-1]
    target = tf.constant(size)
    blocks = tf.where(stored >= 2 * target, stored // target, 1)

    def reduce() -> tf.Tensor:
        reduced = stored // blocks
        start = (stored - reduced * blocks) // 2
        end = start + reduced * blocks
        kept = images[..., start[0] : end[0], start[1] : end[1], :]
        means = tf.image.resize(kept, reduced, method="area")  # exact block means here
        count = tf.reduce_prod(blocks)
        # Pillow's ((sum + count // 2) * (2**24 // count)) >> 24 is (sum + count // 2 - 1)
        # // count when count is not a power of two (2**24 // count then falls short).
        offset = count // 2 - tf.cast(tf.bitwise.bitwise_and(count, count - 1) != 0, tf.int32)
        count_f = tf.cast(count, tf.float32)
        return tf.floor((tf.round(means * count_f) + tf.cast(offset, tf.float32)) / count_f)

    return tf.cond(tf.reduce_any(blocks > 1), reduce, lambda: tf.cast(images, tf.float32))
