"""Typed features and the `Schema` that encodes examples to `tf.train.Example` and back.

The path of one example through tfpipe::

    source value ──encode()──▶ serialized tf.train.Example ──┬─ decode() ─▶ numpy dict
    (path, bytes,               (TFRecord shards)             └─ parse()  ─▶ tensor dict
     PIL, array, name)                                            (tf.data, batched)

`Feature.load()` turns any accepted source value into the decoded numpy value directly, without a
round trip through bytes; the Keras loader uses it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from tfpipe import _decode, _imaging, _orientation
from tfpipe.errors import DecodeError, EncodeError, SchemaError

_FLOAT_DTYPES = ("float16", "float32", "float64")
_INT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Feature:
    """Base of the typed features: how one value is stored, decoded and parsed.

    Subclasses are frozen dataclasses, so a feature is a value that can be compared and
    serialized with `to_json()`.
    """

    kind: ClassVar[str]
    _registry: ClassVar[dict[str, type[Feature]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Feature._registry[cls.kind] = cls

    def encode(self, value: Any) -> tf.train.Feature:
        """Encodes a source value into a new `tf.train.Feature`."""
        proto = tf.train.Feature()
        self.encode_into(value, proto)
        return proto

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        """Encodes a source value into an empty `tf.train.Feature`, in place (no copies)."""
        raise NotImplementedError

    def load(self, value: Any) -> np.ndarray:
        """Decodes a source value (or a stored value) into its numpy form."""
        raise NotImplementedError

    def stored(self, proto: tf.train.Feature) -> Any:
        """The stored value of a `tf.train.Feature`, in a form `load()` accepts."""
        raise NotImplementedError

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        """Decodes the parsed tensor of one example inside a tf.data graph."""
        return parsed

    @property
    def dtype(self) -> str:
        """The numpy dtype name of the decoded value."""
        raise NotImplementedError

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        """The shape of the decoded value (None where it varies)."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {
            "kind": self.kind,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()},
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Feature:
        fields = dict(data)
        kind = fields.pop("kind", None)
        if kind not in Feature._registry:
            raise SchemaError(
                f"unknown feature kind {kind!r}; expected one of {sorted(Feature._registry)}"
            )
        return Feature._registry[kind](**fields)


@dataclasses.dataclass(frozen=True)
class Image(Feature):
    """An image stored as JPEG, PNG or raw uint8 pixels; decoded to uint8 (H, W, C).

    `encode` accepts a file path, encoded bytes, a `PIL.Image` or a uint8 array. A JPEG (or PNG)
    that already has the declared format, size and channels is stored byte for byte, once
    TensorFlow's decoder has accepted it (a corrupt file raises `EncodeError`); anything
    else is converted to the declared channels (EXIF orientation applied) and resized to the
    declared height and width when they are given. `load` (Pillow) and `decode_tensor`
    (TensorFlow) give the same pixels for every image mode (16-bit, palette, CMYK, ...; the
    table is in docs/reliability.md), or both refuse the image.

    Example:
        >>> feature = tfpipe.Image(shape=(128, 128, 3), encoding="jpeg")
        >>> feature.load(np.zeros((256, 256, 3), np.uint8)).shape
        (128, 128, 3)

    Args:
        shape: `(height, width, channels)`; height and width may be None for variable sizes.
            Channels is 1, 3 or 4. Defaults to `(None, None, 3)`.
        encoding: "jpeg", "png" or "raw". Defaults to "jpeg".
        quality: JPEG quality when an image has to be encoded. Defaults to 95.
    """

    kind: ClassVar[str] = "image"
    shape: tuple[int | None, int | None, int] = (None, None, 3)
    encoding: str = "jpeg"
    quality: int = 95

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
        if self.encoding not in ("jpeg", "png", "raw"):
            raise SchemaError(
                "Image.encoding must be 'jpeg', 'png' or 'raw'. "
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

    @property
    def channels(self) -> int:
        return int(self.shape[2])

    @property
    def dtype(self) -> str:
        return "uint8"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return self.shape

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        proto.bytes_list.value.append(self.encode_bytes(value))

    def encode_bytes(self, value: Any) -> bytes:
        """The bytes stored for a value: copied when possible, otherwise encoded."""
        if self.encoding == "raw":
            return self.load(value).tobytes()
        data = _imaging.read_bytes(value)
        if (
            data is not None
            and _imaging.sniff_format(data) == self.encoding
            and _imaging.copyable(data, self.encoding, self.shape[:2], self.channels)
        ):
            _decode.check_decodes(data, self.encoding)
            return data
        image = self._prepare(value if data is None else data, self.shape[:2])
        return _imaging.encode_image(image, self.encoding, self.quality)

    def load(self, value: Any, size: tuple[int, int] | None = None) -> np.ndarray:
        """Decodes to uint8 (H, W, C), resized to `size` or else to the declared size."""
        target = size if size is not None else self.shape[:2]
        if isinstance(value, np.ndarray) and value.shape == (*target, self.channels):
            if value.dtype != np.uint8:
                raise TypeError(f"expected a uint8 image array, got dtype {value.dtype}")
            return value
        return _imaging.as_array(self._prepare(value, target))

    def _prepare(self, value: Any, size: tuple[int | None, int | None]) -> Any:
        """The value as a decoded PIL image with the declared channels, resized to `size`."""
        image = _imaging.open_image(value)
        try:
            return _imaging.prepare(image, self.channels, size)
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
        reduced: bool = False,
        rescale: float | None = None,
    ) -> tf.Tensor:
        """Decodes one stored image in a graph to (H, W, C), resized to `size`.

        The result is uint8, or float32 multiplied by `rescale` when it is given (computed from
        the resize's float output directly, without a round trip through uint8). With
        `reduced=True`, a JPEG larger than twice the target is decoded at a reduced DCT scale
        (1/2, 1/4 or 1/8) before the resize: much faster, pixels differ slightly. JPEGs are
        turned upright by their EXIF orientation, as `load` turns them.
        """
        return self._decode_one(parsed, size, reduced, rescale)

    def _decode_one(
        self,
        parsed: tf.Tensor,
        size: tuple[int, int] | None,
        reduced: bool,
        rescale: float | None,
        turn: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """`decode_tensor`, given the JPEG's EXIF orientation `turn` when known already."""
        size = self._resize_to(size)
        if self.encoding == "raw":
            image = tf.reshape(tf.io.decode_raw(parsed, tf.uint8), self.shape)
        elif reduced and size is not None and self.encoding == "jpeg":
            image = _decode.decode_jpeg_reduced(parsed, self.channels, size, turn)
        else:
            image = _decode.decode(parsed, self.channels, turn)
        image.set_shape((None, None, self.channels) if size else self.shape)
        return resize_and_scale(image, size, rescale)

    def _resize_to(self, size: tuple[int, int] | None) -> tuple[int, int] | None:
        """`size`, or None when the images are stored at that size already."""
        if size is None or tuple(size) == self.shape[:2]:
            return None
        return size

    def decode_batch(
        self,
        parsed: tf.Tensor,
        size: tuple[int, int] | None = None,
        reduced: bool = False,
        rescale: float | None = None,
    ) -> tf.Tensor:
        """Decodes a vector of stored images to (B, H, W, C), like `decode_tensor` per image.

        Raw pixels are decoded for the whole batch in one vectorised op; JPEG and PNG one
        image at a time (`tf.map_fn`), since TensorFlow has no batched image decoder.
        """
        if self.encoding == "raw":
            images = tf.reshape(tf.io.decode_raw(parsed, tf.uint8), (-1, *self.shape))
            return resize_and_scale(images, self._resize_to(size), rescale)
        target = size or self.shape[:2]
        turns = _orientation.orientation(parsed)  # for the whole batch at once: cheaper
        return tf.map_fn(
            lambda item: self._decode_one(item[0], size, reduced, rescale, item[1]),
            (parsed, turns),
            fn_output_signature=tf.TensorSpec(
                (*target, self.channels), tf.uint8 if rescale is None else tf.float32
            ),
        )


def resize_and_scale(
    images: tf.Tensor, size: tuple[int, int] | None, rescale: float | None
) -> tf.Tensor:
    """Bilinear resize of uint8 image(s) to `size` (None: as they are), then uint8 again, or
    float32 times `rescale` when it is given."""
    if size is not None:
        images = tf.image.resize(images, size)
        if rescale is None:
            return tf.saturate_cast(tf.round(images), tf.uint8)
    elif rescale is not None:
        images = tf.cast(images, tf.float32)
    return images if rescale is None else images * rescale


@dataclasses.dataclass(frozen=True)
class ClassLabel(Feature):
    """A class label stored as int64; accepts a class name or an index.

    With `multi_label=True` a value is a list of classes (names or indices, or a string such as
    "[1, 0, 3]") and decodes to a multi-hot float32 vector of length `num_classes`.

    Example:
        >>> label = tfpipe.ClassLabel(names=["cat", "dog"])
        >>> int(label.load("dog"))
        1

    Args:
        names: the class names, index order. Defaults to None (then `num_classes` is needed).
        num_classes: the number of classes when there are no names. Defaults to len(names).
        multi_label: each example has a list of classes. Defaults to False.
    """

    kind: ClassVar[str] = "class_label"
    names: Sequence[str] | None = None
    num_classes: int | None = None
    multi_label: bool = False

    def __post_init__(self) -> None:
        if self.names is not None:
            names = tuple(self.names)
            if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
                raise SchemaError(f"ClassLabel.names must be unique strings. Received: {names}")
            if self.num_classes is not None and self.num_classes != len(names):
                raise SchemaError(
                    f"ClassLabel got {len(names)} names but num_classes={self.num_classes}"
                )
            object.__setattr__(self, "names", names)
            object.__setattr__(self, "num_classes", len(names))
        if self.num_classes is None or self.num_classes < 1:
            raise SchemaError(
                "ClassLabel needs names=[...] or num_classes >= 1. "
                f"Received: names={self.names}, num_classes={self.num_classes}"
            )

    @property
    def dtype(self) -> str:
        return "float32" if self.multi_label else "int64"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return (self.num_classes,) if self.multi_label else ()

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        """Class name -> index (empty without names)."""
        return {name: i for i, name in enumerate(self.names or ())}

    def index(self, value: Any) -> int:
        """The class index of a name or an index; raises for unknown names and bad indices."""
        if isinstance(value, str | bytes) and self.names is not None:
            name = value.decode() if isinstance(value, bytes) else value
            position = self.positions.get(name)
            if position is None:
                raise ValueError(f"unknown class name {name!r}; expected one of {list(self.names)}")
            return position
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            expected = "an int64 index or a class name" if self.names else "an int64 index"
            raise TypeError(f"expected {expected}, got {_describe(value)}")
        if not 0 <= int(value) < int(self.num_classes):  # type: ignore[arg-type]
            raise ValueError(f"class index {int(value)} is out of range [0, {self.num_classes})")
        return int(value)

    def indices(self, value: Any) -> list[int]:
        """The class indices of a single label or, with `multi_label`, of a list of labels."""
        if not self.multi_label:
            return [self.index(value)]
        if isinstance(value, str) and value.lstrip().startswith("["):
            value = parse_list_cell(value)
        if isinstance(value, str | bytes | int | np.integer):
            value = [value]
        return [self.index(v) for v in value]

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        proto.int64_list.value.extend(self.indices(value))

    def load(self, value: Any) -> np.ndarray:
        indices = self.indices(value)
        if not self.multi_label:
            return np.asarray(indices[0], np.int64)
        hot = np.zeros(self.num_classes, np.float32)  # type: ignore[arg-type]
        hot[indices] = 1.0
        return hot

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.int64_list.value
        if self.multi_label:
            return list(values)
        if len(values) != 1:
            raise DecodeError(f"expected one int64 label, found {len(values)} values")
        return values[0]

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        if not self.multi_label:
            return parsed
        hot = tf.one_hot(parsed, self.num_classes, dtype=tf.float32)
        return tf.cast(tf.reduce_sum(hot, axis=-2) > 0, tf.float32)


def parse_list_cell(text: str) -> list[Any]:
    """Parses a cell such as "[1, 0, 3]" or "['cat', 'dog']" safely (never with eval)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"cannot parse {_describe(text)} as a list") from e
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected a list such as '[1, 0, 3]', got {_describe(text)}")
    return list(value)


def _describe_label(label: ClassLabel) -> str:
    text = f"names {list(label.names)}" if label.names is not None else "no names"
    text += f", num_classes={label.num_classes}"
    return text + (", multi_label=True" if label.multi_label else "")


def label_mapping(
    source: ClassLabel, target: ClassLabel, feature: str, sides: tuple[str, str]
) -> np.ndarray | None:
    """Source class index -> target class index, matched by name; None when indices agree.

    Raises a SchemaError naming `feature` and both class lists (`sides` names the two, e.g.
    ("the source", "schema=")) when they cannot be matched: a source name the target lacks, a
    different `multi_label`, or a different number of classes when either side has no names.
    """
    if source == target:
        return None
    if source.multi_label != target.multi_label:
        problem = "one is multi-label, the other is not"
    elif source.names is not None and target.names is not None:
        missing = [n for n in source.names if n not in target.positions]
        if not missing:
            mapping = np.asarray([target.positions[n] for n in source.names], np.int64)
            return None if np.array_equal(mapping, np.arange(len(mapping))) else mapping
        problem = f"{sides[1]} lacks the class(es) {missing}"
    elif source.num_classes != target.num_classes:
        problem = "without names on both sides, classes can only be matched by index"
    else:
        return None
    raise SchemaError(
        f"{feature}: the class labels of {sides[0]} and {sides[1]} cannot be matched by name "
        f"({problem}). {sides[0]}: {_describe_label(source)}; {sides[1]}: "
        f"{_describe_label(target)}. Use one class list for both, e.g. the same schema"
    )


def _remap(value: Any, mapping: np.ndarray) -> Any:
    """A label value with its class indices mapped; names are left for the target to look up."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = parse_list_cell(value)
    if isinstance(value, list | tuple | np.ndarray):
        return [_remap(v, mapping) for v in value]
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        return value  # a name, or a bad value that ClassLabel.index names
    if not 0 <= int(value) < len(mapping):
        raise ValueError(
            f"class index {int(value)} is out of range [0, {len(mapping)}) of the source's classes"
        )
    return int(mapping[int(value)])


class Relabeling:
    """Maps the class indices of a source's examples to a schema's class lists, by name.

    A source whose `ClassLabel` lists ["cat", "dog"] gives index 0 for "cat"; written with a
    schema that lists ["dog", "cat"], that example must be stored as 1. Features whose class
    lists agree are left alone, so an empty `Relabeling` is false and costs nothing.

    Example:
        >>> relabel = Relabeling(Schema({"label": ClassLabel(names=["cat", "dog"])}),
        ...                      Schema({"label": ClassLabel(names=["dog", "cat"])}))
        >>> relabel({"label": 0})
        {'label': 1}

    Args:
        source: the schema the examples' indices refer to.
        target: the schema they are encoded or read with.
        sides: how errors name the two. Defaults to ("the source", "schema=").

    Raises:
        SchemaError: a ClassLabel of both cannot be matched (see `label_mapping`).
    """

    def __init__(
        self, source: Schema, target: Schema, sides: tuple[str, str] = ("the source", "schema=")
    ) -> None:
        self.mappings: dict[str, np.ndarray] = {}
        for name, feature in target.items():
            stored = source.get(name)
            if isinstance(feature, ClassLabel) and isinstance(stored, ClassLabel):
                mapping = label_mapping(stored, feature, name, sides)
                if mapping is not None:
                    self.mappings[name] = mapping

    def __bool__(self) -> bool:
        return bool(self.mappings)

    def __call__(self, example: Mapping[str, Any], where: Where = "example") -> dict[str, Any]:
        """The example with the class indices of every remapped feature rewritten."""
        out = dict(example)
        for name, mapping in self.mappings.items():
            if name in out:
                try:
                    out[name] = _remap(out[name], mapping)
                except ValueError as e:
                    raise EncodeError(f"{name}: {e} in {_where(where)}") from e
        return out


def check_stored_labels(stored: Schema, given: Schema, where: str) -> None:
    """Raises a SchemaError when reading records of `stored` with `given` changes labels.

    Records hold class indices; a `schema=` that lists the classes in another order (or other
    classes) would read them as other classes.
    """
    sides = (f"the metadata of {where}", "schema=")
    for name, feature in given.items():
        kept = stored.get(name)
        if not (isinstance(feature, ClassLabel) and isinstance(kept, ClassLabel)):
            continue
        if label_mapping(kept, feature, name, sides) is not None:
            raise SchemaError(
                f"{name}: schema= lists the classes {list(feature.names or ())} but the records "
                f"of {where} store indices of {list(kept.names or ())} (their metadata): "
                "reading them with schema= would change the labels. Pass schema=None to use "
                "the metadata's schema, or write the records again with the class order you want"
            )


def check_same_class_names(first: Schema, second: Schema, sides: tuple[str, str]) -> None:
    """Raises a SchemaError when a ClassLabel both schemas have lists different class names."""
    for name, feature in first.items():
        other = second.get(name)
        if not (isinstance(feature, ClassLabel) and isinstance(other, ClassLabel)):
            continue
        if feature.names is not None and other.names is not None and feature.names != other.names:
            raise SchemaError(
                f"{name}: {sides[0]} and {sides[1]} have different class names, so the same "
                f"index means different classes. {sides[0]}: {list(feature.names)}; "
                f"{sides[1]}: {list(other.names)}. Build both from one class list, e.g. "
                "tfpipe.from_directory(test_dir, class_names=train_source.class_names), or "
                "split one source with source.split(...)"
            )


@dataclasses.dataclass(frozen=True)
class Tensor(Feature):
    """A numeric array of fixed shape, or with a variable first dimension (None).

    Integers and bools are stored as int64, floats as float32 (float64 loses precision).
    A variable first dimension is read back as a `tf.RaggedTensor` in tf.data batches, and as
    an array of its own length by `Schema.decode()`.

    Example:
        >>> tfpipe.Tensor(shape=(3,), dtype="float32").load([1, 2, 3])
        array([1., 2., 3.], dtype=float32)

    Args:
        shape: the shape of one value; only the first dimension may be None. Defaults to ().
        dtype: a numpy dtype name. Defaults to "float32".
    """

    kind: ClassVar[str] = "tensor"
    shape: tuple[int | None, ...] = ()
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        try:
            name = np.dtype(self.dtype).name
        except TypeError as e:
            raise SchemaError(f"Tensor.dtype {self.dtype!r} is not a numpy dtype") from e
        if name not in _FLOAT_DTYPES + _INT_DTYPES:
            raise SchemaError(
                f"Tensor.dtype must be one of {list(_FLOAT_DTYPES + _INT_DTYPES)} "
                f"(use Text for strings). Received: dtype={self.dtype!r}"
            )
        object.__setattr__(self, "dtype", name)
        if any(d is None for d in self.shape[1:]) or any(
            d is not None and (not isinstance(d, int) or d < 0) for d in self.shape
        ):
            raise SchemaError(
                "Tensor.shape takes non-negative ints, and None only as the first dimension. "
                f"Received: shape={self.shape}"
            )

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return self.shape

    @property
    def is_float(self) -> bool:
        return self.dtype in _FLOAT_DTYPES

    @property
    def storage_dtype(self) -> tf.DType:
        return tf.float32 if self.is_float else tf.int64

    @property
    def variable(self) -> bool:
        return bool(self.shape) and self.shape[0] is None

    def load(self, value: Any) -> np.ndarray:
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"expected {self.dtype}, got {_describe(value)}")
        if self.variable and array.ndim == 1 and len(self.shape) > 1:
            array = array.reshape(-1, *self.shape[1:])
        if array.ndim != len(self.shape) or any(
            d is not None and d != n for d, n in zip(self.shape, array.shape, strict=True)
        ):
            raise ValueError(f"expected shape {self.shape}, got {array.shape}")
        return self.convert(array)

    def convert(self, array: np.ndarray) -> np.ndarray:
        """`array` (any shape) as this dtype; raises ValueError naming the first value that
        would become a different number (300 as uint8, 1e39 as float32)."""
        return _convert(array, self.dtype)

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        flat = self.load(value).ravel()
        if self.is_float:
            proto.float_list.value.extend(_convert(flat, "float32").tolist())
        else:
            proto.int64_list.value.extend(flat.astype(np.int64).tolist())

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.float_list.value if self.is_float else proto.int64_list.value
        return np.asarray(values, self.dtype).reshape(
            [-1 if d is None else d for d in self.shape] if self.shape else ()
        )

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        if self.variable and len(self.shape) > 1:
            parsed = tf.reshape(parsed, [-1, *self.shape[1:]])
        return tf.cast(parsed, self.dtype)


@functools.cache
def _range(dtype: np.dtype[Any]) -> tuple[float, float, str]:
    """The lowest and highest value of a dtype, and how errors show them."""
    if dtype.kind == "b":
        return 0, 1, "0 or 1"
    if dtype.kind == "f":
        top = float(np.finfo(dtype).max)
        return -top, top, f"±{top:.8g}"
    info = np.iinfo(dtype)
    return int(info.min), int(info.max), f"[{info.min}, {info.max}]"


def _convert(array: np.ndarray, dtype: str) -> np.ndarray:
    """`array` as `dtype`; raises ValueError naming the first value that would not survive.

    numpy wraps integers (300 as uint8 is 44) and turns floats beyond the range into inf; NaN
    and inf themselves are data and pass.
    """
    target = np.dtype(dtype)
    if array.size == 0 or np.can_cast(array.dtype, target):
        return array.astype(target, copy=False)
    if array.dtype.kind == "f" and target.kind != "f" and not np.all(np.mod(array, 1) == 0):
        raise TypeError(f"expected {target.name}, got non-integral values {_describe(array)}")
    low, high, limits = _range(target)
    if low <= array.min() and array.max() <= high:  # the common case; NaN takes the long way
        return array.astype(target)
    if target.kind == "f":
        with np.errstate(over="ignore"):
            bad = np.isinf(array.astype(target)) & np.isfinite(array)
    elif target.kind == "b":
        bad = (array != 0) & (array != 1)
    else:
        bad = ~((array >= low) & (array <= high))
    if np.any(bad):
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        at = f" at index {position}" if position else ""
        raise ValueError(
            f"value {array[position].item()!r}{at} is outside the range of {target.name} "
            f"({limits}) and would be stored as a different number; clip or rescale the data, "
            "or declare a wider dtype"
        )
    return array.astype(target)


@dataclasses.dataclass(frozen=True)
class Text(Feature):
    """A string stored as UTF-8 bytes; decoded to `str` by numpy, `tf.string` in graphs.

    Example:
        >>> str(tfpipe.Text().load(b"hello"))
        'hello'
    """

    kind: ClassVar[str] = "text"

    @property
    def dtype(self) -> str:
        return "str"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return ()

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        if isinstance(value, str):
            value = value.encode("utf-8")
        if not isinstance(value, bytes):
            raise TypeError(f"expected str or bytes, got {_describe(value)}")
        proto.bytes_list.value.append(value)

    def load(self, value: Any) -> np.ndarray:
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if not isinstance(value, str):
            raise TypeError(f"expected str or bytes, got {_describe(value)}")
        return np.asarray(value)

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.bytes_list.value
        if len(values) != 1:
            raise DecodeError(f"expected one bytes value, found {len(values)}")
        return values[0]


Where = str | Callable[[], str]


def _where(where: Where) -> str:
    """The text naming an example in an error: `where` itself, or what it returns."""
    return where if isinstance(where, str) else where()


def parse_spec(features: Mapping[str, Feature]) -> dict[str, Any]:
    """The `tf.io.parse_example` spec of a schema: the one place features map to parse specs."""
    spec: dict[str, Any] = {}
    for name, feature in features.items():
        if isinstance(feature, Image | Text):
            spec[name] = tf.io.FixedLenFeature([], tf.string)
        elif isinstance(feature, ClassLabel):
            spec[name] = (
                tf.io.RaggedFeature(tf.int64)
                if feature.multi_label
                else tf.io.FixedLenFeature([], tf.int64)
            )
        elif isinstance(feature, Tensor):
            spec[name] = (
                tf.io.RaggedFeature(feature.storage_dtype)
                if feature.variable
                else tf.io.FixedLenFeature(feature.shape, feature.storage_dtype)
            )
        else:
            raise SchemaError(f"feature {name!r} has no parse spec: {type(feature).__name__}")
    return spec


class Schema(Mapping[str, Feature]):
    """The single description of a record, shared by the writer, the reader and the loaders.

    The data flow through tfpipe::

        source value ──encode()──▶ tf.train.Example bytes ──decode()──▶ dict of numpy arrays
                                                            └─parse()──▶ dict of tensors

    Example:
        >>> schema = tfpipe.Schema({"image": tfpipe.Image(shape=(64, 64, 3)),
        ...                         "label": tfpipe.ClassLabel(names=["cat", "dog"])})
        >>> data = schema.encode({"image": np.zeros((64, 64, 3), np.uint8), "label": "dog"})
        >>> int(schema.decode(data)["label"])
        1

    Args:
        features: a mapping from feature names (the keys in the tf.train.Example) to features.
    """

    def __init__(self, features: Mapping[str, Feature]) -> None:
        if not isinstance(features, Mapping) or not features:
            raise SchemaError(
                f"Schema needs a non-empty mapping of name -> Feature, got {features!r}"
            )
        for name, feature in features.items():
            if not isinstance(name, str) or not name:
                raise SchemaError(f"feature names must be non-empty strings, got {name!r}")
            if not isinstance(feature, Feature):
                raise SchemaError(
                    f"feature {name!r} must be a tfpipe feature (Image, ClassLabel, Tensor, Text), "
                    f"got {type(feature).__name__}"
                )
        self._features = dict(features)

    def __getitem__(self, name: str) -> Feature:
        try:
            return self._features[name]
        except KeyError:
            raise KeyError(f"feature {name!r} is not in the schema; it has {list(self)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self._features == other._features

    def __hash__(self) -> int:
        return hash(tuple(self._features.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v!r}" for k, v in self._features.items())
        return f"Schema({{{inner}}})"

    def check_names(self, names: Sequence[str], argument: str) -> None:
        """Raises a SchemaError naming `argument` when a name is not a feature of the schema."""
        unknown = [n for n in names if n not in self._features]
        if unknown:
            raise SchemaError(
                f"{argument}: feature {unknown[0]!r} is not in the schema; it has {list(self)}"
            )

    def _check_keys(self, example: Mapping[str, Any], where: Where) -> None:
        if not isinstance(example, Mapping):
            raise EncodeError(
                f"{_where(where)}: expected a dict of feature values, got {_describe(example)}"
            )
        if len(example) != len(self._features) or any(n not in example for n in self._features):
            missing = [n for n in self._features if n not in example]
            extra = [n for n in example if n not in self._features]
            raise EncodeError(
                f"{_where(where)} does not match the schema: missing {missing}, "
                f"not in schema {extra}"
            )

    def encode(self, example: Mapping[str, Any], *, where: Where = "example") -> bytes:
        """Serializes one example dict into `tf.train.Example` bytes.

        Args:
            example: a value for every feature, in any form the feature accepts.
            where: how errors name the example, e.g. "example 17 (cats/017.jpg)"; or a function
                returning that text, called only when there is an error. Defaults to "example".
        """
        self._check_keys(example, where)
        proto = tf.train.Example()
        entries = proto.features.feature
        for name, feature in self._features.items():
            try:
                feature.encode_into(example[name], entries[name])
            except (TypeError, ValueError, OSError) as e:
                raise EncodeError(f"{name}: {e} in {_where(where)}") from e
        return proto.SerializeToString()

    def stored(self, serialized: bytes, *, where: Where = "record") -> dict[str, Any]:
        """The stored values of one serialized example (bytes for images, ints for labels)."""
        try:
            proto = tf.train.Example.FromString(serialized).features.feature
        except Exception as e:
            raise DecodeError(f"{_where(where)} is not a serialized tf.train.Example: {e}") from e
        values = {}
        for name, feature in self._features.items():
            if name not in proto:
                raise DecodeError(f"{name}: missing from {_where(where)}; it has {sorted(proto)}")
            try:
                values[name] = feature.stored(proto[name])
            except (TypeError, ValueError) as e:
                raise DecodeError(f"{name}: {e} in {_where(where)}") from e
        return values

    def load(
        self, example: Mapping[str, Any], *, where: Where = "example"
    ) -> dict[str, np.ndarray]:
        """Decodes one example dict of source or stored values into numpy arrays."""
        self._check_keys(example, where)
        out = {}
        for name, feature in self._features.items():
            try:
                out[name] = feature.load(example[name])
            except (TypeError, ValueError, OSError) as e:
                raise DecodeError(f"{name}: {e} in {_where(where)}") from e
        return out

    def decode(self, serialized: bytes, *, where: Where = "record") -> dict[str, np.ndarray]:
        """Decodes one serialized example to numpy arrays, without a TensorFlow graph."""
        return self.load(self.stored(serialized, where=where), where=where)

    def parse_spec(self) -> dict[str, Any]:
        """The spec for `tf.io.parse_example` / `parse_single_example`."""
        return parse_spec(self._features)

    def parse(
        self,
        serialized: tf.Tensor,
        *,
        image_size: tuple[int, int] | None = None,
        reduced_decode: bool = False,
        rescale: float | None = None,
    ) -> dict[str, tf.Tensor]:
        """Parses serialized examples in a tf.data graph.

        A scalar string gives one example; a vector gives a batch, parsed by one vectorised
        `tf.io.parse_example`, with images decoded per element (which needs a fixed image size:
        declared in the schema or given as `image_size`).

        Args:
            serialized: a string tensor of rank 0 or 1.
            image_size: resize every image to `(height, width)`. Defaults to None.
            reduced_decode: decode large JPEGs at a reduced DCT scale before resizing (faster;
                pixels differ slightly from a full decode). Defaults to False.
            rescale: give images as float32 multiplied by this (e.g. 1 / 255). Defaults to None
                (uint8 images).
        """
        serialized = tf.convert_to_tensor(serialized, tf.string)
        parsed = tf.io.parse_example(serialized, self.parse_spec())
        batched = serialized.shape.rank == 1
        out = {}
        for name, feature in self._features.items():
            if isinstance(feature, Image) and batched:
                if None in (image_size or feature.shape[:2]):
                    raise SchemaError(
                        f"{name}: images of variable size cannot be batched; declare a fixed "
                        "shape in Image(shape=...) or pass image_size=(height, width)"
                    )
                out[name] = feature.decode_batch(parsed[name], image_size, reduced_decode, rescale)
            elif isinstance(feature, Image):
                out[name] = feature.decode_tensor(parsed[name], image_size, reduced_decode, rescale)
            elif isinstance(feature, Tensor) and feature.variable and batched:
                ragged = parsed[name]
                inner = math.prod(feature.shape[1:])  # type: ignore[arg-type]
                values = feature.decode_tensor(ragged.flat_values)
                out[name] = tf.RaggedTensor.from_row_lengths(values, ragged.row_lengths() // inner)
            else:
                out[name] = feature.decode_tensor(parsed[name])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {name: feature.to_json() for name, feature in self._features.items()}

    def to_json(self) -> str:
        """The schema as JSON text; `Schema.from_json` reads it back."""
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, data: str | bytes | os.PathLike[str] | Mapping[str, Any]) -> Schema:
        """Reads a schema from JSON text, a parsed dict, or a .json file path."""
        if isinstance(data, os.PathLike):
            with open(data) as f:
                data = f.read()
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                raise SchemaError(f"schema JSON is not valid: {e}") from e
        if not isinstance(data, Mapping):
            raise SchemaError(f"schema JSON must be an object, got {type(data).__name__}")
        features = {}
        for name, spec in data.items():
            try:
                features[name] = Feature.from_json(spec)
            except TypeError as e:
                raise SchemaError(f"feature {name!r} in schema JSON: {e}") from e
        return cls(features)
