"""The Source protocol, shared behaviour of tfpipe's sources, and splits."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tfpipe.checks import check_int, is_positive
from tfpipe.errors import SourceError, TfpipeWarning
from tfpipe.features import ClassLabel
from tfpipe.schema import Schema


@runtime_checkable
class Source(Protocol):
    """Anything with `__len__` and `__getitem__(i) -> example dict` is a source.

    The values of an example are what the schema's features accept: image paths or bytes,
    class names or indices, arrays, strings. No inheritance is needed.

    Examples:
        >>> class Squares:
        ...     def __len__(self):
        ...         return 4
        ...     def __getitem__(self, index):
        ...         return {"x": float(index * index)}
        >>> isinstance(Squares(), tfpipe.Source)
        True
        >>> schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="float32")})
        >>> tfpipe.write_tfrecords(Squares(), "out/squares", schema, progress=False).num_examples
        4
    """

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> dict[str, Any]: ...


class SourceBase:
    """Behaviour tfpipe's own sources share: `schema`, `origin`, `labels`, `split`."""

    schema: Schema

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, index: int) -> dict[str, Any]:
        raise NotImplementedError

    def origin(self, index: int) -> str:
        """A human description of where example `index` comes from (a file path, a row)."""
        return f"example {index}"

    def labels(self) -> np.ndarray | None:
        """The class index of every example, for stratified splits; None when unknown."""
        return None

    def label_sets(self) -> np.ndarray | None:
        """Which classes every example has, `(examples, classes)` booleans, for stratified
        splits of multi-label data; None when the source has no multi-label ClassLabel."""
        return None

    def groups(self) -> np.ndarray | None:
        """A group number per example; `split` keeps each group (e.g. rows of one image file)
        in one split. None when every example is a group of its own."""
        return None

    def columns(self) -> dict[str, np.ndarray] | None:
        """The examples as arrays a `Pipeline` gathers from, by feature name: image file
        paths or pixels, class indices, values; None for a source it does not hold in memory
        (a `from_tfrecords` source: give the Pipeline its path).

        Examples:
            >>> source = tfpipe.from_arrays({"x": np.arange(3.0), "label": np.array([0, 1, 1])})
            >>> source.columns()["label"]
            array([0, 1, 1])
        """
        return None

    def check_index(self, index: int) -> int:
        """Normalizes a possibly negative index; raises IndexError when out of range."""
        size = len(self)
        if type(index) is int and 0 <= index < size:  # the common case, once per example
            return index
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"source indices must be ints, got {type(index).__name__}")
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of range for a source of {size} examples")
        return int(index) % size

    def split(
        self, fractions: Mapping[str, float], *, seed: int = 0, stratify: bool = True
    ) -> dict[str, Subset]:
        """Splits into disjoint sources that together cover every example.

        Examples:
            >>> parts = tfpipe.from_directory("images").split({"train": 0.7, "test": 0.3})
            >>> len(parts["train"]) + len(parts["test"]) == len(tfpipe.from_directory("images"))
            True

        Args:
            fractions: split name -> fraction; the fractions must sum to 1.
            seed: seed of the random assignment. Defaults to 0.
            stratify: keep each class's proportion in every split: by the one class of
                each example, or for multi-label data by iterative stratification of the
                label sets (Sechidis et al., 2011). Needs a ClassLabel. Defaults to True.
        """
        return split(self, fractions, seed=seed, stratify=stratify)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} examples, features={list(self.schema)})"


class Subset(SourceBase):
    """The examples of `source` at `indices`, in that order."""

    def __init__(self, source: SourceBase, indices: Sequence[int] | np.ndarray) -> None:
        self.source = source
        self.indices = np.asarray(indices, np.int64)
        self.schema = source.schema

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.source[int(self.indices[self.check_index(index)])]

    def origin(self, index: int) -> str:
        return self.source.origin(int(self.indices[self.check_index(index)]))

    def labels(self) -> np.ndarray | None:
        labels = self.source.labels()
        return None if labels is None else labels[self.indices]

    def label_sets(self) -> np.ndarray | None:
        sets = self.source.label_sets()
        return None if sets is None else sets[self.indices]

    def groups(self) -> np.ndarray | None:
        groups = self.source.groups()
        return None if groups is None else groups[self.indices]

    def columns(self) -> dict[str, np.ndarray] | None:
        columns = self.source.columns()
        if columns is None:
            return None
        return {name: column[self.indices] for name, column in columns.items()}


def _allocate(count: int, fractions: Sequence[float]) -> list[int]:
    """Splits `count` items by `fractions` with the largest-remainder method (sums to count)."""
    exact = [count * f for f in fractions]
    sizes = [math.floor(e) for e in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: exact[i] - sizes[i], reverse=True)
    for i in by_remainder[: count - sum(sizes)]:
        sizes[i] += 1
    return sizes


def multi_hot(feature: ClassLabel, values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """The `label_sets` of the values of a multi-label ClassLabel (lists of classes)."""
    sets = np.zeros((len(values), feature.num_classes or 0), bool)
    for row, value in enumerate(values):
        sets[row, feature.indices(value)] = True
    return sets


def _by_label_sets(sets: np.ndarray, fractions: Sequence[float], rng: Any) -> list[np.ndarray]:
    """Iterative stratification (Sechidis, Tsoumakas and Vlahavas, 2011): the unit indices of
    each split, so that every class's share of its units is close to the split's fraction.

    The rarest class still to place goes first: each of its units goes to the split that most
    lacks that class (ties: the split that lacks most units, then at random), and every class
    it has counts as placed there. Units without a class fill the splits' remaining sizes.
    """
    wanted = np.asarray(fractions, float)
    per_class = np.outer(wanted, sets.sum(axis=0))  # splits x classes still wanted
    per_split = wanted * len(sets)
    chosen = np.full(len(sets), -1)
    left = sets.copy()
    while left.any():
        counts = left.sum(axis=0)
        rarest = np.flatnonzero(counts == counts[counts > 0].min())[0]
        for unit in rng.permutation(np.flatnonzero(left[:, rarest])):
            keys = np.stack([rng.random(len(wanted)), per_split, per_class[:, rarest]])
            part = np.lexsort(keys)[-1]  # most wanted for the class, then in size, then random
            chosen[unit] = part
            per_class[part] -= sets[unit]
            per_split[part] -= 1
            left[unit] = False
    for unit in rng.permutation(np.flatnonzero(chosen < 0)):
        part = int(np.argmax(per_split))
        chosen[unit] = part
        per_split[part] -= 1
    return [np.flatnonzero(chosen == k) for k in range(len(wanted))]


def _by_class(labels: np.ndarray) -> list[np.ndarray]:
    """The positions of each class's labels, classes in order, positions ascending: one
    stable sort, not a pass over every label per class (1,000 classes of ImageNet)."""
    order = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.diff(labels[order])) + 1
    return np.split(order, starts)


def split(
    source: SourceBase, fractions: Mapping[str, float], *, seed: int = 0, stratify: bool = True
) -> dict[str, Subset]:
    """Splits a source into disjoint subsets; see `SourceBase.split`."""
    if not isinstance(fractions, Mapping) or not fractions:
        raise ValueError(
            f"fractions must be a dict such as {{'train': 0.7, 'test': 0.3}}, got {fractions!r}"
        )
    values = list(fractions.values())
    if not all(map(is_positive, values)) or abs(sum(values) - 1) > 1e-6:
        raise ValueError(f"fractions must be positive and sum to 1, got {dict(fractions)}")
    check_int("seed", seed, minimum=0)
    if len(source) == 0:
        raise SourceError("cannot split an empty source")
    rng = np.random.default_rng(seed)
    labels = source.labels() if stratify else None
    sets = source.label_sets() if stratify and labels is None else None
    if stratify and labels is None and sets is None:
        warnings.warn(
            f"split(stratify=True) ignored: {type(source).__name__} has no ClassLabel feature "
            "whose classes it could keep in proportion; pass stratify=False to split at "
            "random without this warning",
            TfpipeWarning,
            stacklevel=3,
        )
    # Units are what gets assigned: examples, or groups of examples of one image.
    members = source.groups()
    if members is None:
        members = np.arange(len(source))
    ids, firsts = np.unique(members, return_index=True)
    if sets is not None:
        units = _by_label_sets(sets[firsts], values, rng)
        return {
            name: Subset(source, np.flatnonzero(np.isin(members, ids[chunk])))
            for name, chunk in zip(fractions, units, strict=True)
        }
    unit_labels = None if labels is None else labels[firsts]
    classes = [np.arange(len(firsts))] if unit_labels is None else _by_class(unit_labels)
    if unit_labels is not None:
        small = [(int(unit_labels[g[0]]), len(g)) for g in classes if len(g) < len(values)]
        if small:
            label, count = small[0]
            warnings.warn(
                f"split: class {label} has {count} example(s), fewer than the {len(values)} "
                f"splits, so some splits miss it ({len(small)} such class(es)); "
                "merge rare classes or use fewer splits",
                TfpipeWarning,
                stacklevel=3,
            )
    parts: list[list[np.ndarray]] = [[] for _ in values]
    for group in classes:
        shuffled = rng.permutation(group)
        bounds = np.cumsum([0, *_allocate(len(group), values)])
        for k in range(len(values)):
            parts[k].append(shuffled[bounds[k] : bounds[k + 1]])
    return {
        name: Subset(source, np.flatnonzero(np.isin(members, ids[np.concatenate(chunks)])))
        for name, chunks in zip(fractions, parts, strict=True)
    }
