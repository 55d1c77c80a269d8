"""Guessing a `Schema` from the first records of TFRecord files that anything wrote."""

from __future__ import annotations

import collections
import warnings
from collections.abc import Iterator, Sequence

import tensorflow as tf

from tfpipe import fs
from tfpipe.errors import DecodeError, SchemaError, TfpipeWarning, tf_message
from tfpipe.features import ClassLabel, Feature, Image, Mask, Tensor, Text, decoding, imaging
from tfpipe.format.compression import compression_of, tf_compression
from tfpipe.format.resolution import PathArg, ResolvedData, resolve
from tfpipe.schema import Schema

_MASK_WORDS = ("mask", "segmentation")
_CHANNELS_FOR_MODE = {"1": 1, "L": 1, "LA": 4, "RGBA": 4, "PA": 4}
_CHANNELS_FOR_MODE.update(dict.fromkeys(imaging.SIXTEEN_BIT_GRAY, 1))


def records(
    files: Sequence[fs.AnyPath], limit: int | None = None
) -> Iterator[tuple[fs.AnyPath, int, bytes]]:
    """Yields `(file, record index in file, serialized record)`, at most `limit` in total.

    Raises:
        DecodeError: a file is not a (complete) TFRecord file; the message names it.
    """
    remaining = limit
    for file in files:
        if remaining is not None and remaining <= 0:
            return
        dataset = tf.data.TFRecordDataset(
            str(file), compression_type=tf_compression(compression_of(file))
        )
        if remaining is not None:
            dataset = dataset.take(remaining)
        index = 0
        try:
            for record in dataset.as_numpy_iterator():
                yield file, index, record
                index += 1
                if remaining is not None:
                    remaining -= 1
        except tf.errors.OpError as e:
            raise DecodeError(
                f"{str(file)!r} is not a readable TFRecord file (truncated or not a TFRecord) "
                f"at record {index}: {tf_message(e)}"
            ) from e


class _Observed:
    """What the sampled records hold under one key."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.lengths: set[int] = set()
        self.values: list[bytes | int | float] = []
        self.count = 0


def _observe(files: Sequence[fs.AnyPath], num_records: int) -> tuple[dict[str, _Observed], int]:
    observed: dict[str, _Observed] = collections.defaultdict(_Observed)
    total = 0
    for file, index, record in records(files, num_records):
        try:
            example = tf.train.Example.FromString(record)
        except Exception as e:  # protobuf raises its own DecodeError type
            raise DecodeError(
                f"record {index} of {file.name} is not a serialized tf.train.Example "
                f"(tf.train.SequenceExample is not supported): {e}"
            ) from e
        total += 1
        for key, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            seen = observed[key]
            seen.count += 1
            if kind is None:
                seen.lengths.add(0)
                continue
            values = getattr(feature, kind).value
            seen.kinds.add(kind)
            seen.lengths.add(len(values))
            seen.values.extend(values)
    return observed, total


def _image_feature(key: str, encoded: list[bytes], formats: set[str | None]) -> Image | Mask:
    if any(word in key.lower() for word in _MASK_WORDS) and not any(
        decoding.gray_png_problem(data, "uint8") for data in encoded
    ):
        headers = {imaging.image_size(data) for data in encoded}
        size = headers.pop() if len(headers) == 1 else None  # (width, height)
        return Mask(shape=(size[1], size[0], 1) if size else (None, None, 1))
    sizes = set()
    channels = set()
    for data in encoded:
        with imaging.open_image(data) as image:  # a bomb is a DecodeError, not Pillow's
            sizes.add((image.height, image.width))
            mode = image.mode
            if mode == "P" and "transparency" in image.info:
                mode = "PA"
            channels.add(_CHANNELS_FOR_MODE.get(mode, 3))
    height, width = next(iter(sizes)) if len(sizes) == 1 else (None, None)
    found = sorted(f for f in formats if f is not None)
    encoding = found[0] if len(found) == 1 else "auto"  # JPEG and PNG: each kept as it is
    depth = max(channels)
    if depth == 4 and encoding == "jpeg":
        depth = 3
    return Image(shape=(height, width, depth), encoding=encoding)


def _guess(key: str, seen: _Observed) -> Feature | str:
    """The feature for one key, or the reason it cannot be described."""
    if len(seen.kinds) > 1:
        return f"its type varies between records ({sorted(seen.kinds)})"
    if not seen.kinds:
        return "it is empty in every sampled record"
    kind = next(iter(seen.kinds))
    variable = len(seen.lengths) > 1
    length = next(iter(seen.lengths))
    if kind == "bytes_list":
        if variable or length != 1:
            return "it holds lists of strings (tfpipe stores one string or image per feature)"
        encoded = [v for v in seen.values if isinstance(v, bytes)]
        formats = {imaging.sniff_format(data) for data in encoded}
        if None not in formats:
            return _image_feature(key, encoded, formats)
        return Text()
    numbers = [v for v in seen.values if not isinstance(v, bytes)]
    if (
        kind == "int64_list"
        and "label" in key.lower()
        and seen.lengths == {1}
        and min(numbers) >= 0
    ):
        return ClassLabel(num_classes=int(max(numbers)) + 1)
    shape: tuple[int | None, ...] = (None,) if variable else (() if length == 1 else (length,))
    return Tensor(shape=shape, dtype="int64" if kind == "int64_list" else "float32")


def infer_schema(files: PathArg | ResolvedData, num_records: int = 100) -> Schema:
    """Builds a Schema from the first records of TFRecord files written by anything.

    Reads up to `num_records` `tf.train.Example` records and describes each key:

    - bytes that sniff as JPEG or PNG -> `Image` (channels from the image headers; height and
      width fixed when every sampled image has the same size, else None); 8-bit grayscale
      PNGs whose key contains "mask" or "segmentation" -> `Mask` (any uint8 value allowed);
    - other bytes -> `Text` (raw pixel bytes look like text too: pass `schema=` for those);
    - int64 scalars whose key contains "label" -> `ClassLabel(num_classes=max + 1)`: the number
      of classes is a guess from the largest label seen, and the class names are unknown;
    - other numbers -> `Tensor` of int64 or float32, shape `()` for one value, `(n,)` for a
      fixed length, `(None,)` when lengths vary (multi-dimensional shapes are flattened).

    Limits: only the sampled records are seen, so a later image of another size, a larger
    label, or a length that varies only later breaks the guess; pass an explicit schema then.
    Keys missing from some records, lists of strings and keys whose type varies are left out
    with a `TfpipeWarning`.

    Examples:
        >>> schema = tfpipe.infer_schema("out/train-*.tfrecord")
        >>> schema["image"]
        Image(shape=(32, 32, 3), encoding='jpeg', quality=95)
        >>> schema["label"]
        ClassLabel(names=None, num_classes=3, multi_label=False)

    Args:
        files: a TFRecord file, a glob, a folder, a dataset prefix, or a list of them; local,
            or URLs TensorFlow opens ("gs://bucket/train-*").
        num_records: how many records to sample, from the first file on. Defaults to 100.

    Returns:
        The inferred schema, keys in sorted order.

    Raises:
        DataNotFoundError: `files` names no TFRecord file.
        DecodeError: a record is not a `tf.train.Example`, or a file is not a TFRecord file.
        SchemaError: no record, or no key that can be described.
    """
    if isinstance(num_records, bool) or not isinstance(num_records, int) or num_records < 1:
        raise ValueError(
            f"num_records must be a positive int. Received: num_records={num_records!r}"
        )
    paths = resolve(files, argument="files", check=False).record_files("infer_schema")
    observed, total = _observe(paths, num_records)
    if total == 0:
        raise SchemaError(f"cannot infer a schema: no records in {[str(p) for p in paths[:3]]}")
    features: dict[str, Feature] = {}
    left_out = []
    for key in sorted(observed):
        seen = observed[key]
        guess = (
            f"it is missing from {total - seen.count} of {total} sampled records"
            if seen.count < total
            else _guess(key, seen)
        )
        if isinstance(guess, str):
            left_out.append(f"{key!r}: {guess}")
        else:
            features[key] = guess
    if not features:
        raise SchemaError(f"cannot infer a schema from {paths[0].name}: " + "; ".join(left_out))
    if left_out:
        warnings.warn(
            f"infer_schema left out {len(left_out)} feature(s) of {paths[0].name}: "
            + "; ".join(left_out)
            + ". Pass schema= to read them.",
            TfpipeWarning,
            stacklevel=2,
        )
    return Schema(features)
