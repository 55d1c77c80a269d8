"""Typed features and the `Schema` that encodes examples to `tf.train.Example` and back.

The path of one example through tfpipe::

    source value ──encode()──▶ serialized tf.train.Example ──┬─ decode() ─▶ numpy dict
    (path, bytes,               (TFRecord shards)             └─ parse()  ─▶ tensor dict
     PIL, array, name)                                            (tf.data, batched)

`Feature.load()` turns any accepted source value into the decoded numpy value directly, without a
round trip through bytes; the Keras loader uses it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

import numpy as np
import tensorflow as tf

from tfpipe.errors import DecodeError, EncodeError, SchemaError
from tfpipe.features import ClassLabel, Feature, Image, Mask, Tensor, Text
from tfpipe.features.base import Where, describe_value, where_text
from tfpipe.features.decoding import StoredImages
from tfpipe.features.mask import check_mask_sizes, mask_image_pairs, same_size_tensor

Kind = TypeVar("Kind", bound=Feature)

__all__ = ["ClassLabel", "Feature", "Image", "Mask", "Schema", "Tensor", "Text", "parse_spec"]

F = TypeVar("F", bound=Feature)
G = TypeVar("G", bound=Feature)


def parse_spec(features: Mapping[str, Feature]) -> dict[str, Any]:
    """The `tf.io.parse_example` spec of a schema: each feature's own `parse_spec()`."""
    spec: dict[str, Any] = {}
    for name, feature in features.items():
        try:
            spec[name] = feature.parse_spec()
        except SchemaError as e:
            raise SchemaError(
                f"feature {name!r} has no parse spec: {type(feature).__name__}"
            ) from e
    return spec


class Schema(Mapping[str, Feature]):
    """The single description of a record, shared by the writer, the reader and the loaders.

    The data flow through tfpipe::

        source value ──encode()──▶ tf.train.Example bytes ──decode()──▶ dict of numpy arrays
                                                            └─parse()──▶ dict of tensors

    Examples:
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
                    f"feature {name!r} must be a tfpipe feature (Image, Mask, ClassLabel, Tensor, "
                    f"Text), got {type(feature).__name__}"
                )
        self._features = dict(features)
        self._mask_pairs = mask_image_pairs(self._features)

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

    @overload
    def of(self, kind: type[F], /) -> dict[str, F]: ...

    @overload
    def of(self, kind: type[F], other: type[G], /) -> dict[str, F | G]: ...

    @overload
    def of(self, *kinds: type[Feature]) -> dict[str, Feature]: ...

    def of(self, *kinds: type[Feature]) -> dict[str, Any]:
        """The features of the given kinds, by name, in schema order: what code outside
        `tfpipe.features` asks instead of checking each feature's class. Typed by the kinds
        asked: `schema.of(Image)` holds `Image` features.

        Examples:
            >>> schema = tfpipe.Schema({"image": tfpipe.Image(), "mask": tfpipe.Mask(),
            ...                         "label": tfpipe.ClassLabel(names=["cat", "dog"])})
            >>> list(schema.of(tfpipe.Image, tfpipe.Mask)), list(schema.of(tfpipe.Text))
            (['image', 'mask'], [])
        """
        return {name: f for name, f in self._features.items() if isinstance(f, kinds)}

    def stored_images(self) -> dict[str, dict[str, Any]]:
        """Image name -> what the writer vouched for of its stored images (`Image.storage`),
        as a metadata file's "stored_images" holds it; only the images that have it.

        Examples:
            >>> schema = tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.Text()})
            >>> schema.stored_images(), schema.as_written().stored_images()
            ({}, {'image': {'formats': ['jpeg'], 'upright': True}})
        """
        images = self.of(Image).items()
        return {name: f.storage.to_json() for name, f in images if f.storage is not None}

    def with_stored_images(self, stored: Mapping[str, Any]) -> Schema:
        """This schema with each image's `storage` facts read from `stored` (as
        `stored_images` gives them), and None for an image it does not name: how a reader
        applies what the metadata of the records it reads vouches for.

        Examples:
            >>> schema = tfpipe.Schema({"image": tfpipe.Image()})
            >>> facts = {"image": {"formats": ["jpeg"], "upright": True}}
            >>> schema.with_stored_images(facts)["image"].storage.upright
            True

        Raises:
            SchemaError: an entry of `stored` is not what `stored_images` gives.
        """
        images = self.of(Image)
        facts = {name: StoredImages.from_json(v) for name, v in stored.items() if name in images}
        return Schema(
            {
                name: dataclasses.replace(images[name], storage=facts.get(name))
                if name in images
                else feature
                for name, feature in self._features.items()
            }
        )

    def as_written(
        self,
        formats: Mapping[str, Collection[str]] | None = None,
        sizes: Mapping[str, tuple[int, int]] | None = None,
    ) -> Schema:
        """The schema `write_tfrecords` saves in its metadata: each image's `storage` facts
        set to what the writer stored (`Image.as_written`), in the `formats` it noted per
        image name (else those its `encoding` allows), of the one size `sizes` gives (if any).

        Examples:
            >>> schema = tfpipe.Schema({"image": tfpipe.Image(encoding="auto")})
            >>> schema.as_written({"image": {"jpeg"}})["image"].storage
            StoredImages(formats=('jpeg',), upright=True, size=None)
        """
        noted, one_size = formats or {}, sizes or {}
        written = {
            name: image.as_written(noted.get(name, ()), one_size.get(name))
            for name, image in self.of(Image).items()
        }
        return Schema({name: written.get(name, f) for name, f in self._features.items()})

    def check_names(self, names: Sequence[str], argument: str) -> None:
        """Raises a SchemaError naming `argument` when a name is not a feature of the schema.

        Examples:
            >>> schema = tfpipe.Schema({"label": tfpipe.ClassLabel(names=["cat", "dog"])})
            >>> schema.check_names(["label", "weight"], "x")
            Traceback (most recent call last):
            ...
            tfpipe.errors.SchemaError: x: feature 'weight' is not in the schema; it has ['label']
        """
        unknown = [n for n in names if n not in self._features]
        if unknown:
            raise SchemaError(
                f"{argument}: feature {unknown[0]!r} is not in the schema; it has {list(self)}"
            )

    def _check_keys(self, example: Mapping[str, Any], where: Where) -> None:
        if not isinstance(example, Mapping):
            raise EncodeError(
                f"{where_text(where)}: expected a dict of feature values, "
                f"got {describe_value(example)}"
            )
        if len(example) != len(self._features) or any(n not in example for n in self._features):
            missing = [n for n in self._features if n not in example]
            extra = [n for n in example if n not in self._features]
            raise EncodeError(
                f"{where_text(where)} does not match the schema: missing {missing}, "
                f"not in schema {extra}"
            )

    def encode(self, example: Mapping[str, Any], *, where: Where = "example") -> bytes:
        """Serializes one example dict into `tf.train.Example` bytes.

        Examples:
            >>> schema = tfpipe.Schema({"label": tfpipe.ClassLabel(names=["cat", "dog"])})
            >>> data = schema.encode({"label": "dog"})
            >>> tf.train.Example.FromString(data).features.feature["label"].int64_list.value
            [1]

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
                raise EncodeError(f"{name}: {e} in {where_text(where)}") from e
        try:
            check_mask_sizes(self._mask_pairs, example)
        except ValueError as e:
            raise EncodeError(f"{e} in {where_text(where)}") from e
        return proto.SerializeToString(deterministic=True)  # map keys sorted: same bytes anywhere

    def stored(self, serialized: bytes, *, where: Where = "record") -> dict[str, Any]:
        """The stored values of one serialized example (bytes for images, ints for labels).

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> schema = DatasetInfo.load("out/train").schema
            >>> record = next(iter(tf.data.TFRecordDataset("out/train-00000-of-00002.tfrecord")))
            >>> stored = schema.stored(record.numpy())
            >>> stored["image"][:2], stored["label"] in (0, 1, 2)  # the JPEG, a class index
            (b'\\xff\\xd8', True)
        """
        try:
            proto = tf.train.Example.FromString(serialized).features.feature
        except Exception as e:
            raise DecodeError(
                f"{where_text(where)} is not a serialized tf.train.Example: {e}"
            ) from e
        values = {}
        for name, feature in self._features.items():
            if name not in proto:
                raise DecodeError(
                    f"{name}: missing from {where_text(where)}; it has {sorted(proto)}"
                )
            try:
                values[name] = feature.stored(proto[name])
            except (TypeError, ValueError) as e:
                raise DecodeError(f"{name}: {e} in {where_text(where)}") from e
        return values

    def load(
        self, example: Mapping[str, Any], *, where: Where = "example"
    ) -> dict[str, np.ndarray]:
        """Decodes one example dict of source or stored values into numpy arrays.

        Examples:
            >>> schema = tfpipe.Schema({"image": tfpipe.Image(shape=(16, 16, 3)),
            ...                         "label": tfpipe.ClassLabel(names=["circle", "square"])})
            >>> example = schema.load({"image": "images/circle/circle_00000.jpg",
            ...                        "label": "circle"})
            >>> example["image"].shape, int(example["label"])
            ((16, 16, 3), 0)
        """
        self._check_keys(example, where)
        out = {}
        for name, feature in self._features.items():
            try:
                out[name] = feature.load(example[name])
            except (TypeError, ValueError, OSError) as e:
                raise DecodeError(f"{name}: {e} in {where_text(where)}") from e
        try:
            check_mask_sizes(self._mask_pairs, example)
        except ValueError as e:
            raise DecodeError(f"{e} in {where_text(where)}") from e
        return out

    def decode(self, serialized: bytes, *, where: Where = "record") -> dict[str, np.ndarray]:
        """Decodes one serialized example to numpy arrays, without a TensorFlow graph.

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> schema = DatasetInfo.load("out/train").schema
            >>> record = next(iter(tf.data.TFRecordDataset("out/train-00000-of-00002.tfrecord")))
            >>> example = schema.decode(record.numpy())
            >>> example["image"].shape, example["image"].dtype
            ((32, 32, 3), dtype('uint8'))
        """
        return self.load(self.stored(serialized, where=where), where=where)

    def parse_spec(self) -> dict[str, Any]:
        """The spec for `tf.io.parse_example` / `parse_single_example`.

        Examples:
            >>> tfpipe.Schema({"label": tfpipe.ClassLabel(num_classes=2)}).parse_spec()
            {'label': FixedLenFeature(shape=[], dtype=tf.int64, default_value=None)}
        """
        return parse_spec(self._features)

    def parse(
        self,
        serialized: tf.Tensor,
        *,
        image_size: tuple[int, int] | None = None,
        reduced_decode: bool = True,
        rescale: float | None = None,
        defer_images: bool = False,
    ) -> dict[str, tf.Tensor]:
        """Parses serialized examples in a tf.data graph.

        A scalar string gives one example; a vector gives a batch, parsed by one vectorised
        `tf.io.parse_example`, with images and masks decoded per element (which needs a fixed
        size: declared in the schema or given as `image_size`).

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> schema = DatasetInfo.load("out/train").schema
            >>> record = next(iter(tf.data.TFRecordDataset("out/train-00000-of-00002.tfrecord")))
            >>> batch = schema.parse(tf.stack([record, record]), image_size=(64, 64))
            >>> batch["image"].shape, batch["label"].shape
            (TensorShape([2, 64, 64, 3]), TensorShape([2]))

        Args:
            serialized: a string tensor of rank 0 or 1.
            image_size: resize every image (block means, then bilinear, when shrinking) and every
                `Mask` (nearest neighbour, so they stay aligned) to `(height, width)`.
                Defaults to None.
            reduced_decode: decode JPEGs at least twice `image_size` at a reduced DCT scale
                before resizing, as every tfpipe path does (`Image.decode_tensor`); False
                decodes in full (slower, finer). Defaults to True.
            rescale: give `Image` features as float32 multiplied by this (e.g. 1 / 255); masks
                keep their integer values. Defaults to None (uint8 images).
            defer_images: leave images and masks as their stored bytes, to be decoded one
                example at a time by `decode_images` (after an unbatch: a parallel map of single
                decodes keeps more cores busy than a `tf.map_fn` over a batch). Defaults to
                False.
        """
        serialized = tf.convert_to_tensor(serialized, tf.string)
        parsed = tf.io.parse_example(serialized, self.parse_spec())
        batched = serialized.shape.rank == 1
        pictures = self.of(Image, Mask)  # decoded one by one from their stored bytes
        for name, picture in pictures.items() if batched else ():
            if None in (image_size or picture.shape[:2]):
                raise SchemaError(
                    f"{name}: {picture.kind}s of variable size cannot be batched; declare a "
                    f"fixed shape in {type(picture).__name__}(shape=...) or pass "
                    "image_size=(height, width)"
                )
        out = {}
        for name, feature in self._features.items():
            if name in pictures:
                out[name] = parsed[name]  # stored bytes: decoded below, or by decode_images
            elif batched:
                out[name] = feature.decode_batch(parsed[name])
            else:
                out[name] = feature.decode_tensor(parsed[name])
        if batched and not defer_images:
            for name, image in self.of(Image).items():
                out[name] = image.decode_batch(parsed[name], image_size, reduced_decode, rescale)
            for name, mask in self.of(Mask).items():
                out[name] = mask.decode_batch(parsed[name], image_size)
        if not batched and not defer_images:
            out = self.decode_images(out, image_size, reduced_decode, rescale)
        return {name: out[name] for name in self._features}

    def decode_images(
        self,
        example: Mapping[str, tf.Tensor],
        image_size: tuple[int, int] | None = None,
        reduced_decode: bool = True,
        rescale: float | None = None,
        orientations: Mapping[str, tf.Tensor] | None = None,
    ) -> dict[str, tf.Tensor]:
        """Decodes the images and masks of one example parsed with `defer_images=True`, as
        `parse` decodes them; the other features pass unchanged.

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> schema = DatasetInfo.load("out/train").schema
            >>> record = next(iter(tf.data.TFRecordDataset("out/train-00000-of-00002.tfrecord")))
            >>> stored = schema.parse(record, defer_images=True)
            >>> example = schema.decode_images(stored, image_size=(64, 64), rescale=1 / 255)
            >>> example["image"].shape, example["image"].dtype
            (TensorShape([64, 64, 3]), tf.float32)

        Args:
            example: feature name -> tensor of one example, images and masks as stored bytes.
            image_size: as in `parse`. Defaults to None.
            reduced_decode: as in `parse`. Defaults to True.
            rescale: as in `parse`. Defaults to None.
            orientations: image name -> its EXIF orientation, read already for a whole batch
                with `Image.orientations` before the unbatch (cheaper than per image).
                Defaults to None (read here).
        """
        out = dict(example)
        turns = dict(orientations or {})
        images = self.of(Image)
        for _, image in self._mask_pairs:
            if image not in turns:  # read once, for its masks' size check and its decode
                turn = images[image].orientations(out[image])
                turns[image] = tf.constant(1) if turn is None else turn  # None: upright
        for pair in self._mask_pairs:
            mask, image = pair
            out[mask] = same_size_tensor(out[mask], out[image], pair, turns.get(image))
        for name, image_feature in images.items():
            out[name] = image_feature.decode_tensor(
                out[name],
                image_size,
                reduced=reduced_decode,
                rescale=rescale,
                orientation=turns.get(name),
            )
        for name, mask_feature in self.of(Mask).items():
            out[name] = mask_feature.decode_tensor(out[name], image_size)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Feature name -> the feature's `to_json()` dict (what metadata files hold).

        Examples:
            >>> tfpipe.Schema({"label": tfpipe.ClassLabel(num_classes=2)}).to_dict()
            {'label': {'kind': 'class_label', 'names': None, 'num_classes': 2,
                       'multi_label': False}}
        """
        return {name: feature.to_json() for name, feature in self._features.items()}

    def to_json(self) -> str:
        """The schema as JSON text; `Schema.from_json` reads it back.

        Examples:
            >>> schema = tfpipe.Schema({"text": tfpipe.Text()})
            >>> print(schema.to_json())
            {
              "text": {
                "kind": "text"
              }
            }
        """
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, data: str | bytes | os.PathLike[str] | Mapping[str, Any]) -> Schema:
        """Reads a schema from JSON text, a parsed dict, or a .json file path.

        Examples:
            >>> schema = tfpipe.Schema({"label": tfpipe.ClassLabel(names=["cat", "dog"])})
            >>> tfpipe.Schema.from_json(schema.to_json()) == schema
            True
        """
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
