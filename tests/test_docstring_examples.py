"""Every `Example:` of the public API runs as written, and every public entry point has one.

Public: the names `tfpipe` exports, the public methods and properties their classes define,
and `tfpipe.augment`. The examples run as doctests in one working folder made once per module
(`images/`, `out/train`, `model`: see `world`), each in a fresh namespace.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfpipe
import tfpipe.augment
from tfpipe.synthetic import make_image_folder, make_tagged_images

fit_module = importlib.import_module("tfpipe.fit")  # `tfpipe.fit` is the function

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def public_entries() -> list[tuple[str, Any]]:
    """(qualified name, object) of every public function, class, method and property."""
    entries: list[tuple[str, Any]] = []
    augment = [n for n, v in vars(tfpipe.augment).items() if _defined_in(v, tfpipe.augment)]
    modules = [(tfpipe, tfpipe.__all__), (tfpipe.augment, augment)]
    for module, names in modules:
        for name in names:
            value = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(value):
                continue
            qualified = f"{module.__name__}.{name}"
            entries.append((qualified, value))
            if inspect.isclass(value):
                entries.extend(_members(qualified, value))
    return entries


def _defined_in(value: Any, module: Any) -> bool:
    return getattr(value, "__module__", None) == module.__name__


def _members(qualified: str, cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties `cls` itself defines (inherited ones are documented
    where they are defined; an override without a docstring shares its base's)."""
    for name, member in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if isinstance(member, property):
            member = member.fget
        if inspect.isfunction(member):
            yield f"{qualified}.{name}", member


def docstring(value: Any) -> str:
    """The docstring help() shows: its own, else the one of the method it overrides."""
    return inspect.getdoc(value) or ""


ENTRIES = public_entries()
WITH_EXAMPLES = [(name, value) for name, value in ENTRIES if ">>>" in docstring(value)]


def test_every_public_entry_point_has_an_example() -> None:
    missing = [name for name, value in ENTRIES if ">>>" not in docstring(value)]
    assert missing == [], f"public names without an `Example:` (>>> lines): {missing}"


def test_examples_sit_under_an_example_heading() -> None:
    misplaced = [
        name
        for name, value in WITH_EXAMPLES
        if "Example:" not in docstring(value).split(">>>", 1)[0]
    ]
    assert misplaced == []


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The working folder the examples name, made once: `images/` (3 classes of 8 JPEGs of
    32x32), its records `out/train` (24 examples in 2 shards), a copy `out/damaged` with
    one byte of its second shard flipped, `train-jpg/` (2 JPEGs named as Kaggle's Planet
    data), and `model`, a tiny compiled classifier of the images."""
    root = tmp_path_factory.mktemp("docstring-examples")
    make_image_folder(root / "images", num_classes=3, per_class=8, size=(32, 32))
    make_tagged_images(root, count=2, size=(32, 32))
    source = tfpipe.from_directory(root / "images", image_shape=(32, 32, 3))
    tfpipe.write_tfrecords(source, root / "out" / "train", num_shards=2, progress=False)
    tfpipe.write_tfrecords(source, root / "out" / "damaged", num_shards=2, progress=False)
    shard = root / "out" / "damaged-00001-of-00002.tfrecord"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return {"root": root, "model": model}


@pytest.mark.parametrize(("name", "value"), WITH_EXAMPLES, ids=[n for n, _ in WITH_EXAMPLES])
def test_example_runs(
    name: str, value: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(world["root"])
    # tfpipe.fit's probes are timed; shorter ones keep the examples quick, with the same output.
    monkeypatch.setattr(fit_module, "PROBE_SECONDS", 0.2)
    monkeypatch.setattr(fit_module, "INPUT_PROBE_SECONDS", 0.2)
    globs = {"tfpipe": tfpipe, "np": np, "tf": tf, "keras": keras, "pd": pd}
    globs["model"] = world["model"]
    source_file = inspect.getsourcefile(inspect.unwrap(value)) or name
    test = doctest.DocTestParser().get_doctest(docstring(value), globs, name, source_file, 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    output: list[str] = []
    runner.run(test, out=output.append)
    assert runner.failures == 0, "".join(output)
