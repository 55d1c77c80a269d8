"""`Mask`: a label image (segmentation mask) of integer class values, stored as a lossless PNG.

A mask is never an image: its values are classes, so it is stored losslessly (a grayscale PNG
of 8 or 16 bits), decoded to integers, resized with nearest neighbour only (a value between two
classes is no class) and never rescaled. The numpy path (Pillow) and the tf.data path give the
same values: both resize with `nearest_indices`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf
from PIL import Image as PILImage

from tfpipe.checks import is_int
from tfpipe.errors import SchemaError, SourceError
from tfpipe.features import decoding, imaging
from tfpipe.features.base import SHOWN_VALUES, Feature, tfds_image
from tfpipe.features.image import Image

# Pillow modes whose pixel values are the mask values: palette indices (not their colours),
# bilevel, 8-bit and 16/32-bit grayscale.
_VALUE_MODES = ("P", "1", "L", "I", *imaging.SIXTEEN_BIT_GRAY)
_LOSSY_FORMATS = ("JPEG", "MPO")
_COLOR_MODES = ("RGB", "RGBA", "P", "PA")
# Pillow scales 2- and 4-bit grayscale to 0..255 (x 0x55, x 0x11); a mask keeps the stored values.
_LOW_BIT_GRAY = {"L;2": 0x55, "L;4": 0x11}


@dataclasses.dataclass(frozen=True)
class Mask(Feature):
    """A segmentation mask: integer class values per pixel, stored as a lossless PNG.

    `encode` and `load` accept a file path, encoded bytes, a `PIL.Image` or an integer array.
    The values are kept exactly: a palette PNG gives its indices (not its colours), a grayscale
    PNG (8 or 16 bits) its values. A JPEG mask (lossy) is refused, and so is a colour mask (RGB:
    colours are not classes) unless `colors` says which colour is which class. Masks decode to
    `dtype` (uint8, or uint16 with more than 256 classes), are resized with nearest neighbour
    only (every value of a resized mask is a value of the original) and are never rescaled:
    `image_size=` resizes them with the images, so image and mask stay aligned, while
    `rescale=` applies to `Image` features only.

    Examples:
        >>> mask = tfpipe.Mask(shape=(64, 64, 1), num_classes=3, ignore_value=255)
        >>> values = mask.load(np.array([[0, 2], [255, 1]], np.uint8))
        >>> values.shape, values.dtype, sorted(np.unique(values).tolist())
        ((64, 64, 1), dtype('uint8'), [0, 1, 2, 255])

    Args:
        shape: `(height, width, 1)`, or `(height, width)` for masks without a channel axis;
            height and width may be None for variable sizes. Defaults to `(None, None, 1)`.
        num_classes: the number of classes; a value outside `0..num_classes - 1` (other than
            `ignore_value`) is an error naming it. Defaults to None (any value of `dtype`).
        ignore_value: one more allowed value outside the classes, e.g. 255 for "void" pixels.
            Defaults to None.
        colors: the `(r, g, b)` colour of each class, in class order, for masks drawn in
            colours (e.g. CamVid): colour images (RGB, RGBA, palette) are then read by colour,
            a colour not in the list being an error; grayscale images and `(H, W)` arrays are
            still class values. Sets `num_classes`. Defaults to None.
    """

    kind: ClassVar[str] = "mask"
    shape: tuple[int | None, ...] = (None, None, 1)
    num_classes: int | None = None
    ignore_value: int | None = None
    colors: Sequence[Sequence[int]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        if self.colors is not None:
            self._check_colors()
        if len(self.shape) not in (2, 3) or self.shape[2:] not in ((), (1,)):
            raise SchemaError(
                "Mask.shape must be (height, width, 1) or (height, width). "
                f"Received: shape={self.shape}"
            )
        for dim in self.shape[:2]:
            if dim is not None and (not is_int(dim) or dim <= 0):
                raise SchemaError(
                    f"Mask.shape height and width must be positive ints or None. "
                    f"Received: shape={self.shape}"
                )
        if self.num_classes is not None and (
            not is_int(self.num_classes) or not 1 <= self.num_classes <= 65536
        ):
            raise SchemaError(
                "Mask.num_classes must be an int in 1..65536 or None. "
                f"Received: num_classes={self.num_classes!r}"
            )
        if self.ignore_value is not None and (
            not is_int(self.ignore_value) or not 0 <= self.ignore_value <= 65535
        ):
            raise SchemaError(
                "Mask.ignore_value must be an int in 0..65535 or None. "
                f"Received: ignore_value={self.ignore_value!r}"
            )

    def tfds_json(self) -> dict[str, Any]:
        return tfds_image(
            self.shape if len(self.shape) == 3 else (*self.shape, 1), self.dtype, "png"
        )

    def _check_colors(self) -> None:
        colors = tuple(tuple(c) for c in self.colors or ())
        if (
            not colors
            or any(len(c) != 3 or not all(is_int(v) and 0 <= v <= 255 for v in c) for c in colors)
            or len(set(colors)) != len(colors)
        ):
            raise SchemaError(
                "Mask.colors must be a non-empty list of distinct (r, g, b) colours of ints in "
                f"0..255, one per class. Received: colors={self.colors!r}"
            )
        if self.num_classes is not None and self.num_classes != len(colors):
            raise SchemaError(
                f"Mask got {len(colors)} colors but num_classes={self.num_classes}. "
                f"Received: colors={self.colors!r}"
            )
        object.__setattr__(self, "colors", colors)
        object.__setattr__(self, "num_classes", len(colors))

    @functools.cached_property
    def _color_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The colours as sorted `r << 16 | g << 8 | b` keys, and the class of each key."""
        keys = np.asarray([r << 16 | g << 8 | b for r, g, b in self.colors or ()], np.int64)
        order = np.argsort(keys)
        return keys[order], order.astype(self.dtype)

    def _classes_of_colors(self, rgb: np.ndarray) -> np.ndarray:
        """The class of every pixel of an (H, W, 3) colour mask; raises for other colours."""
        keys = (rgb[..., 0].astype(np.int64) << 16) | (rgb[..., 1].astype(np.int64) << 8)
        keys |= rgb[..., 2]
        table, classes = self._color_table
        positions = np.minimum(np.searchsorted(table, keys), len(table) - 1)
        unknown = table[positions] != keys
        if unknown.any():
            row, column = (int(i) for i in np.argwhere(unknown)[0])
            colour = tuple(int(v) for v in rgb[row, column])
            raise ValueError(
                f"mask colour {colour} at row {row}, column {column} is not one of the "
                f"{len(table)} colors of Mask(colors=...); add it, or fix the mask"
            )
        return classes[positions]

    @property
    def dtype(self) -> str:
        """uint8, or uint16 when a class or `ignore_value` does not fit in 8 bits.

        Examples:
            >>> tfpipe.Mask(num_classes=3).dtype, tfpipe.Mask(num_classes=300).dtype
            ('uint8', 'uint16')
        """
        top = max((self.num_classes or 1) - 1, self.ignore_value or 0)
        return "uint8" if top <= 255 else "uint16"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return self.shape

    @property
    def encoded_image(self) -> bool:
        return True

    @property
    def inferred_because(self) -> str:
        return "8-bit grayscale PNGs under a key naming a mask or segmentation"

    def summarize(self, value: np.ndarray) -> str:
        if value.size == 0:
            return super().summarize(value)
        values = np.unique(value).tolist()
        shown = ", ".join(map(str, values[:SHOWN_VALUES]))
        more = ", ..." if len(values) > SHOWN_VALUES else ""
        return f"{value.dtype.name} {tuple(value.shape)} values [{shown}{more}]"

    def parse_spec(self) -> tf.io.FixedLenFeature | tf.io.RaggedFeature:
        return tf.io.FixedLenFeature([], tf.string)

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        """Stores a value as a grayscale PNG of `dtype`, at the declared size when declared.

        Examples:
            >>> proto = tf.train.Feature()
            >>> tfpipe.Mask(num_classes=3).encode_into(np.array([[0, 2], [1, 1]]), proto)
            >>> proto.bytes_list.value[0][:4]
            b'\\x89PNG'
        """
        values = self.load(value)
        image = PILImage.fromarray(values.reshape(values.shape[:2]))
        proto.bytes_list.value.append(imaging.encode_image(image, "png", 0))

    def load(self, value: Any, size: tuple[int, int] | None = None) -> np.ndarray:
        """The mask values as `dtype` of the declared rank, resized (nearest) to `size`, else
        to the declared size.

        Raises:
            TypeError: not a path, bytes, PIL image or integer array.
            ValueError: a lossy or colour mask, a value that is not a class, a wrong shape.

        Examples:
            >>> tfpipe.Mask(num_classes=3).load(np.array([[0, 2], [1, 1]]), size=(4, 4))[0, :, 0]
            array([0, 0, 2, 2], dtype=uint8)
        """
        try:
            values = self._values(value)
        except (ValueError, OSError) as e:
            if isinstance(value, str | os.PathLike):
                raise type(e)(f"{os.fspath(value)}: {e}") from e
            raise
        height, width = size if size is not None else self.shape[:2]
        values = resize_nearest(values, (height or values.shape[0], width or values.shape[1]))
        return values if len(self.shape) == 2 else values[..., np.newaxis]

    def array_column(self, name: str, array: np.ndarray) -> np.ndarray:
        try:
            return np.stack([self.load(mask, mask.shape[:2]) for mask in array])
        except (TypeError, ValueError) as e:
            raise SourceError(f"{name}: {e}") from e

    def _values(self, value: Any) -> np.ndarray:
        """The (H, W) values of a source or stored value, checked against the classes."""
        if isinstance(value, np.ndarray | list):
            array = np.asarray(value)
            if array.dtype.kind not in "biu":
                raise TypeError(
                    f"expected a mask array of integers (class values), got dtype {array.dtype}"
                )
            if self.colors is not None and array.ndim == 3 and array.shape[-1] == 3:
                return self._classes_of_colors(array)
        else:
            image = imaging.open_image(value)
            if self.colors is not None and image.mode in _COLOR_MODES:
                _refuse_lossy(image)
                return self._classes_of_colors(np.asarray(image.convert("RGB")))
            array = _image_values(image)
        if array.ndim == 3 and array.shape[-1] == 1:
            array = array[..., 0]
        if array.ndim != 2:
            raise ValueError(f"expected a mask of shape (H, W) or (H, W, 1), got {array.shape}")
        self._check_values(array)
        return array.astype(self.dtype, copy=False)

    def _check_values(self, array: np.ndarray) -> None:
        """Raises ValueError naming the first value that is not a class (nor `ignore_value`)."""
        if array.size == 0:
            raise ValueError(f"the mask is empty (shape {array.shape})")
        limit = self.num_classes or np.iinfo(self.dtype).max + 1
        low, high = array.min(), array.max()
        if low >= 0 and high < limit:  # the common case, without a boolean mask
            return
        bad = (array < 0) | (array >= limit)
        if self.ignore_value is not None:
            bad &= array != self.ignore_value
        if not bad.any():
            return
        row, column = (int(i) for i in np.argwhere(bad)[0])
        found = array[row, column].item()
        if self.num_classes is not None:
            allowed = f"num_classes={self.num_classes} allows 0..{self.num_classes - 1}"
            if self.ignore_value is not None:
                allowed += f" and ignore_value={self.ignore_value}"
            fix = "declare Mask(num_classes=..., ignore_value=...) to match the data"
        else:
            allowed = f"{self.dtype} holds 0..{limit - 1}"
            fix = "declare Mask(num_classes=...) above 256 to store 16-bit masks"
        raise ValueError(
            f"mask value {found} at row {row}, column {column} is not a class: {allowed}; {fix}"
        )

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.bytes_list.value
        if len(values) != 1:
            raise ValueError(f"expected one bytes value, found {len(values)}")
        problem = decoding.gray_png_problem(values[0], self.dtype)
        if problem is not None:
            raise ValueError(problem)
        return values[0]

    def decode_tensor(self, parsed: tf.Tensor, size: tuple[int, int] | None = None) -> tf.Tensor:
        """Decodes one stored mask in a graph to `dtype`, resized (nearest) to `size`; a value
        that is not a class fails (as `load` fails).

        Examples:
            >>> mask = tfpipe.Mask(num_classes=3)
            >>> stored = mask.stored(mask.encode(np.array([[0, 2], [1, 1]])))
            >>> mask.decode_tensor(tf.constant(stored))[..., 0].numpy()
            array([[0, 2],
                   [1, 1]], dtype=uint8)
        """
        return self._decode(parsed, size, batched=False)

    def decode_batch(self, parsed: tf.Tensor, size: tuple[int, int] | None = None) -> tf.Tensor:
        """Decodes a vector of stored masks to (B, H, W[, 1]), like `decode_tensor` per mask.

        The PNGs are decoded one at a time (`tf.map_fn`); the checks of the stored format and
        of the values, and the resize of masks of a declared size, run once for the batch.

        Examples:
            >>> mask = tfpipe.Mask(shape=(2, 2, 1), num_classes=3)
            >>> stored = mask.stored(mask.encode(np.array([[0, 2], [1, 1]])))
            >>> mask.decode_batch(tf.constant([stored, stored])).shape
            TensorShape([2, 2, 2, 1])
        """
        return self._decode(parsed, size, batched=True)

    def _decode(self, parsed: tf.Tensor, size: tuple[int, int] | None, batched: bool) -> tf.Tensor:
        if size is not None and tuple(size) == self.shape[:2]:
            size = None
        fixed = None not in self.shape[:2]
        declared = (*self.shape[:2], 1)

        def one(data: tf.Tensor) -> tf.Tensor:
            mask = tf.io.decode_png(data, channels=1, dtype=tf.as_dtype(self.dtype))
            mask.set_shape(declared)
            if fixed or size is None:
                return mask  # resized for the whole batch below
            return resize_nearest_tensor(self._checked(mask), size)

        data = decoding.check_gray_png(parsed, self.dtype)
        if batched:
            each = declared if fixed else (*size, 1)  # type: ignore[misc]
            masks = tf.map_fn(one, data, fn_output_signature=tf.TensorSpec(each, self.dtype))
        else:
            masks = one(data)
        if fixed or size is None:
            masks = self._checked(masks)
            if size is not None:
                masks = resize_nearest_tensor(masks, size, axis=1 if batched else 0)
        return masks if len(self.shape) == 3 else masks[..., 0]

    def _checked(self, mask: tf.Tensor) -> tf.Tensor:
        """`mask`, once asserted to hold only classes (and `ignore_value`)."""
        if self.num_classes is None:
            return mask  # any value of the dtype is allowed
        values = mask
        if self.ignore_value is not None:
            values = tf.where(tf.equal(mask, self.ignore_value), tf.zeros_like(mask), mask)
        largest = tf.reduce_max(values)
        check = tf.debugging.Assert(
            largest < self.num_classes,
            [
                f"a mask value is not a class (num_classes={self.num_classes}, "
                f"ignore_value={self.ignore_value}); `tfpipe verify` names the record; "
                "largest value:",
                largest,
            ],
        )
        with tf.control_dependencies([check]):
            return tf.identity(mask)


def _refuse_lossy(image: PILImage.Image) -> None:
    if image.format in _LOSSY_FORMATS:
        raise ValueError(
            f"a {image.format} mask is lossy: its values are not the classes that were drawn; "
            "save masks as PNG"
        )


def _image_values(image: PILImage.Image) -> np.ndarray:
    """The pixel values of a mask image: palette indices, gray levels; never colours."""
    _refuse_lossy(image)
    if image.mode not in _VALUE_MODES:
        raise ValueError(
            f"a mask must hold one class value per pixel (a palette or grayscale PNG), got a "
            f"{image.mode} image: colours are not classes; save it as a palette or grayscale "
            "PNG of class indices, or declare Mask(colors=[...]) with the colour of each class"
        )
    scale = _LOW_BIT_GRAY.get(imaging.raw_mode(image) or "", 1)
    try:
        values = np.asarray(image)
    except (OSError, SyntaxError) as e:  # Pillow raises SyntaxError for broken PNG chunks
        raise OSError(f"cannot decode mask: {e}") from e
    return values // scale if scale != 1 else values


def nearest_indices(source: int, target: int) -> np.ndarray:
    """The source rows (or columns) a nearest-neighbour resize from `source` to `target`
    picks: the one under each target pixel's centre, `floor((i + 0.5) * source / target)`,
    in integers so that numpy and TensorFlow pick the same."""
    return (2 * np.arange(target) + 1) * source // (2 * target)


def resize_nearest(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of a (H, W, ...) array to `size` (the array when it fits)."""
    if values.shape[:2] == tuple(size):
        return values
    rows = nearest_indices(values.shape[0], size[0])
    columns = nearest_indices(values.shape[1], size[1])
    return values[rows[:, np.newaxis], columns]


def resize_nearest_tensor(values: tf.Tensor, size: tuple[int, int], axis: int = 0) -> tf.Tensor:
    """`resize_nearest` in a graph: dimensions `axis` and `axis + 1` of `values` to `size`."""
    for offset, target in enumerate(size):
        source = tf.cast(tf.shape(values, out_type=tf.int64)[axis + offset], tf.int64)
        picks = (2 * tf.range(target, dtype=tf.int64) + 1) * source // (2 * target)
        values = tf.gather(values, picks, axis=axis + offset)
    return values


def mask_image_pairs(features: Mapping[str, Feature]) -> list[tuple[str, str]]:
    """Every (mask, image) pair of feature names of a schema, whose sizes must agree: each
    mask with each image, but an image the schema itself declares at another size (a 4x4
    thumbnail beside a 40x48 photo and its mask)."""
    masks = {name: f for name, f in features.items() if isinstance(f, Mask)}
    images = {name: f for name, f in features.items() if isinstance(f, Image)}
    return [
        (mask, image)
        for mask, mask_feature in masks.items()
        for image, image_feature in images.items()
        if all(
            None in (a, b) or a == b
            for a, b in zip(mask_feature.shape[:2], image_feature.shape[:2], strict=True)
        )
    ]


def check_mask_sizes(pairs: list[tuple[str, str]], example: Mapping[str, Any]) -> None:
    """Raises ValueError when a mask of `example` has another height or width than an image
    of it (before any resize; the image turned upright by its EXIF orientation): resized to
    one size, the mask would no longer cover its image pixel for pixel.

    Examples:
        >>> pairs = [("mask", "image")]
        >>> check_mask_sizes(pairs, {"mask": np.zeros((4, 4)), "image": np.zeros((4, 6, 3))})
        Traceback (most recent call last):
        ...
        ValueError: mask: the mask is 4x4 (height x width) but image 'image' is 4x6: ...
    """
    for mask, image in pairs:
        mask_size = imaging.header_size(example[mask], upright=False)
        image_size = imaging.header_size(example[image])
        if None not in (mask_size, image_size) and mask_size != image_size:
            raise ValueError(
                f"{mask}: the mask{_file(example[mask])} is {_sized(mask_size)} (height x "
                f"width) but image {image!r}{_file(example[image])} is {_sized(image_size)}: "
                "a mask must have its image's size, to cover it pixel for pixel"
            )


def same_size_tensor(
    mask_data: tf.Tensor, image_data: tf.Tensor, pair: tuple[str, str], turn: tf.Tensor | None
) -> tf.Tensor:
    """`mask_data` (one stored mask), once asserted to be stored at the height and width of
    its image `image_data` (upright by its EXIF orientation `turn`; read when None), in a
    graph, before both are resized: as `check_mask_sizes` does in Python. An image stored in
    another format than JPEG or PNG is not checked."""
    mask, image = pair
    mask_size = decoding.stored_size(mask_data, tf.constant(1))  # as stored, never turned
    image_size = decoding.stored_size(image_data, turn)
    check = tf.debugging.Assert(
        tf.reduce_any(image_size < 0) | tf.reduce_all(mask_size == image_size),
        [
            f"{mask}: the mask is stored at another size than image {image!r}: a mask must "
            "have its image's size, to cover it pixel for pixel. (height, width) of the mask, "
            "of the image:",
            mask_size,
            image_size,
        ],
    )
    with tf.control_dependencies([check]):
        return tf.identity(mask_data)


def _sized(size: tuple[int, int] | None) -> str:
    return "x".join(map(str, size or ()))


def _file(value: Any) -> str:
    """ " (<path>)" for a file path value, else nothing."""
    return f" ({os.fspath(value)})" if isinstance(value, str | os.PathLike) else ""
