"""Human-readable lines about datasets and examples, shared by the CLI and the demo."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tfpipe.features import ClassLabel, Feature, Image, Mask, Text
from tfpipe.format.metadata import DatasetInfo
from tfpipe.schema import Schema

_TEXT_CHARS = 40
MAX_LISTED = 10
_UNITS = ("B", "KB", "MB", "GB", "TB")


def format_bytes(num_bytes: float) -> str:
    """`1536` -> `"1.5 KB"` (powers of 1024)."""
    value, unit = float(num_bytes), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.0f} B" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def listed(lines: list[str], what: str) -> list[str]:
    """The first `MAX_LISTED` lines, then `  ... and 12 more shards` if there are more."""
    if len(lines) <= MAX_LISTED:
        return lines
    return [*lines[:MAX_LISTED], f"  ... and {len(lines) - MAX_LISTED} more {what}"]


def describe_schema(schema: Schema) -> list[str]:
    """One line per feature: `  image: Image(shape=(64, 64, 3), ...)`."""
    width = max(len(name) for name in schema)
    return [f"  {name:<{width}}  {feature!r}" for name, feature in schema.items()]


def _inferred_because(feature: Feature) -> str:
    """Why `infer_schema` made `feature` what it is (its rules, in words)."""
    if isinstance(feature, Mask):
        return "8-bit grayscale PNGs under a key naming a mask or segmentation"
    if isinstance(feature, Image):
        found = "JPEG and PNG" if feature.encoding == "auto" else feature.encoding.upper()
        return f"its bytes are {found} images"
    if isinstance(feature, ClassLabel):
        return (
            "one int64 per record under a key containing 'label'; the class count is the "
            "largest label seen + 1, the names are unknown"
        )
    if isinstance(feature, Text):
        return "bytes that are not JPEG or PNG (raw pixel bytes look like text too)"
    if feature.dtype == "int64":
        return "int64 values; only one int per record under a key containing 'label' is a class"
    return "float values (images stored as floats stay Tensors: only JPEG and PNG are Images)"


def describe_inference(schema: Schema) -> list[str]:
    """One line per inferred feature: why it was inferred so, and how to choose otherwise."""
    width = max(len(name) for name in schema)
    return [
        "inferred from the first records (pass schema= to read_tfrecords to choose):",
        *(
            f"  {name:<{width}}  {type(feature).__name__}: {_inferred_because(feature)}"
            for name, feature in schema.items()
        ),
    ]


def describe_info(info: DatasetInfo) -> list[str]:
    """Counts, size, compression, shards and skipped inputs of a written dataset."""
    lines = [
        f"{info.name}: {info.num_examples} examples in {len(info.shards)} shard(s), "
        f"{format_bytes(info.num_bytes)}, compression {info.compression or 'none'}, "
        + (f"shuffled (seed {info.seed})" if info.shuffled else "not shuffled"),
        f"  metadata {info.metadata_path}",
    ]
    lines += listed(
        [
            f"  {shard.file}  {shard.num_examples} examples  {format_bytes(shard.num_bytes)}"
            for shard in info.shards
        ],
        "shards",
    )
    if info.skipped:
        first = info.skipped[0]
        lines.append(
            f"  skipped {len(info.skipped)} unreadable input(s), first {first.origin}: "
            f"{first.error}"
        )
    return lines


def _value_summary(name: str, value: Any, schema: Schema) -> str:
    feature = schema[name]
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    if isinstance(feature, Text) or array.dtype.kind in "SUO":
        text = array.item()
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        shown = text if len(text) <= _TEXT_CHARS else text[: _TEXT_CHARS - 3] + "..."
        return f"text {shown!r}"
    head = f"{array.dtype.name} {tuple(array.shape)}"
    if isinstance(feature, ClassLabel):
        indices = [int(i) for i in np.flatnonzero(array)] if feature.multi_label else [int(array)]
        names = feature.names
        labels = ", ".join(f"{i} ({names[i]})" if names is not None else str(i) for i in indices)
        return f"{head} = [{labels}]" if feature.multi_label else f"{head} = {labels}"
    if array.size == 0:
        return f"{head} empty"
    if isinstance(feature, Mask):
        values = np.unique(array).tolist()
        shown = ", ".join(map(str, values[:MAX_LISTED])) + (
            ", ..." if len(values) > MAX_LISTED else ""
        )
        return f"{head} values [{shown}]"
    if array.size == 1:
        return f"{head} = {array.item()!r}"
    return f"{head} min {array.min().item()!r} max {array.max().item()!r} mean {array.mean():.3g}"


def describe_example(example: Mapping[str, Any], schema: Schema) -> list[str]:
    """One line per feature of a decoded example: dtype, shape and min/max (or the value)."""
    width = max(len(name) for name in example)
    return [
        f"  {name:<{width}}  {_value_summary(name, value, schema)}"
        for name, value in example.items()
    ]
