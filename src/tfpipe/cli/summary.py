"""Human-readable lines about datasets and examples, shared by the CLI and the demo."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tfpipe.format.metadata import DatasetInfo
from tfpipe.schema import Schema

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


def describe_inference(schema: Schema) -> list[str]:
    """One line per inferred feature: why it was inferred so, and how to choose otherwise."""
    width = max(len(name) for name in schema)
    return [
        "inferred from the first records (pass schema= to read_tfrecords to choose):",
        *(
            f"  {name:<{width}}  {type(feature).__name__}: {feature.inferred_because}"
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
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    return schema[name].summarize(array)


def describe_example(example: Mapping[str, Any], schema: Schema) -> list[str]:
    """One line per feature of a decoded example: dtype, shape and min/max (or the value)."""
    width = max(len(name) for name in example)
    return [
        f"  {name:<{width}}  {_value_summary(name, value, schema)}"
        for name, value in example.items()
    ]
