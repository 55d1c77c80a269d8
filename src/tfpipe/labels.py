"""Matching class labels by name: between a source and a schema, stored records and a
`schema=`, or a training and a validation set. An index means a class only with its list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tfpipe.errors import EncodeError, SchemaError
from tfpipe.features.base import Where, where_text
from tfpipe.features.class_label import ClassLabel, parse_list_cell
from tfpipe.features.mask import Mask

if TYPE_CHECKING:
    from tfpipe.schema import Schema


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

    Examples:
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
        stored = source.of(ClassLabel)
        for name, feature in target.of(ClassLabel).items():
            if name in stored:
                mapping = label_mapping(stored[name], feature, name, sides)
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
                    raise EncodeError(f"{name}: {e} in {where_text(where)}") from e
        return out


def check_stored_labels(stored: Schema, given: Schema, where: str) -> None:
    """Raises a SchemaError when reading records of `stored` with `given` changes labels.

    Records hold class indices; a `schema=` that lists the classes in another order (or other
    classes) would read them as other classes. A `Mask` of fewer classes than the metadata's
    would fail on the first mask value it lacks, mid-epoch and without the file.
    """
    masks, kept_masks = given.of(Mask), stored.of(Mask)
    labels, kept_labels = given.of(ClassLabel), stored.of(ClassLabel)
    for name in given:
        if name in masks and name in kept_masks:
            _check_stored_mask(name, kept_masks[name], masks[name], where)
        elif name in labels and name in kept_labels:
            _check_stored_label(name, kept_labels[name], labels[name], where)


def _check_stored_label(name: str, kept: ClassLabel, given: ClassLabel, where: str) -> None:
    """Raises a SchemaError when `given` reads the indices of the metadata's `kept` as other
    classes."""
    if label_mapping(kept, given, name, (f"the metadata of {where}", "schema=")) is not None:
        raise SchemaError(
            f"{name}: schema= lists the classes {list(given.names or ())} but the records "
            f"of {where} store indices of {list(kept.names or ())} (their metadata): "
            "reading them with schema= would change the labels. Pass schema=None to use "
            "the metadata's schema, or write the records again with the class order you want"
        )


def _check_stored_mask(name: str, kept: Mask, given: Mask, where: str) -> None:
    """Raises a SchemaError when `given` refuses a value the metadata's `kept` allows."""
    if kept.num_classes is None or given.num_classes is None:
        return  # values unknown, or any value of the stored bit depth (checked as read)
    ignored = kept.ignore_value
    lost = ignored is not None and ignored >= given.num_classes and ignored != given.ignore_value
    if kept.num_classes > given.num_classes or lost:
        raise SchemaError(
            f"{name}: schema= declares Mask(num_classes={given.num_classes}, ignore_value="
            f"{given.ignore_value}) but the records of {where} hold masks of num_classes="
            f"{kept.num_classes}, ignore_value={kept.ignore_value} (their metadata): reading "
            "would fail at the first value schema= lacks. Pass schema=None to use the "
            "metadata's schema, or declare the Mask as the metadata does"
        )


def check_same_class_names(first: Schema, second: Schema, sides: tuple[str, str]) -> None:
    """Raises a SchemaError when a ClassLabel both schemas have lists different class names."""
    others = second.of(ClassLabel)
    for name, feature in first.of(ClassLabel).items():
        other = others.get(name)
        if other is None:
            continue
        if feature.names is not None and other.names is not None and feature.names != other.names:
            raise SchemaError(
                f"{name}: {sides[0]} and {sides[1]} have different class names, so the same "
                f"index means different classes. {sides[0]}: {list(feature.names)}; "
                f"{sides[1]}: {list(other.names)}. Build both from one class list, e.g. "
                "tfpipe.from_directory(test_dir, class_names=train_source.class_names), or "
                "split one source with source.split(...)"
            )
