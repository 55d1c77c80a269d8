"""Which features a model takes and predicts: `x` and `y` names -> the `(x, y)` pairs of fit.

Keras's conventions for multi-input and multi-output models::

    x="image"                          -> x is one tensor
    x=["image", "depth"]               -> x is a tuple, in the order of the model's inputs
    x={"pixels": "image", "d": "depth"} -> x is a dict {model input name: tensor}, matched by name

`y` takes the same forms, for the model's outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from tfpipe.errors import SchemaError

Names = str | Sequence[str] | Mapping[str, str]


def feature_names(argument: str, names: Any, where: str) -> list[str]:
    """The feature names that `names` (a name, a list, or a dict of model name -> feature name)
    selects; raises ValueError naming `argument` for any other form."""
    if isinstance(names, str):
        items: list[Any] = [names]
    elif isinstance(names, Mapping):
        items = [*names.values()] if all(isinstance(k, str) for k in names) else []
    elif isinstance(names, Sequence):
        items = list(names)
    else:
        items = []
    if not items or not all(isinstance(n, str) and n for n in items):
        raise ValueError(
            f"{where}: {argument} must be a feature name, a list of names, or a dict of model "
            f"input/output name -> feature name. Received: {argument}={names!r}"
        )
    return items


def check_known(
    x: Names | None, y: Names | None, available: Collection[str], where: str, what: str
) -> None:
    """Raises a SchemaError naming `x` or `y` when it selects a feature not in `available`
    (and a ValueError when either has the wrong form, None included)."""
    for argument, names in (("x", x), ("y", y)):
        unknown = [n for n in feature_names(argument, names, where) if n not in available]
        if unknown:
            raise SchemaError(
                f"{where}: feature {unknown[0]!r} is not in {what} ({argument}={names!r}); "
                f"it has {list(available)}. Pass feature names of {what} as {argument}"
            )


def pick(example: Mapping[str, Any], names: Names) -> Any:
    """The part of an example dict that `names` selects: a value, a tuple or a dict."""
    if isinstance(names, str):
        return example[names]
    if isinstance(names, Mapping):
        return {key: example[name] for key, name in names.items()}
    return tuple(example[name] for name in names)


def selector(x: Names, y: Names) -> Callable[[Mapping[str, Any]], tuple[Any, Any]]:
    """The function turning an example dict into the `(x, y)` pair `x` and `y` describe."""
    return lambda example: (pick(example, x), pick(example, y))
