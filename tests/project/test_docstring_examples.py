"""Every `Examples:` section of the public API runs as written; every public entry point has one.

Public: the names `tfpipe` exports, the result types and errors public where they are made
(`RESULT_TYPES`), the public methods and properties their classes define, and
`tfpipe.augment`. The examples run as doctests in one working folder made once per module
(`images/`, `out/train`, `model`: see `world`), each in a fresh namespace.
"""

from __future__ import annotations

import dataclasses
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
from test_public_api import RESULT_TYPES

import tfpipe
import tfpipe.loaders.augment
from tfpipe.sources.synthetic import make_image_folder, make_tagged_images
from tfpipe.training import model_probe

fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclasses.dataclass(frozen=True)
class Entry:
    """A public name, the docstring `help()` shows for it, and the function or class that
    holds that docstring (an override without one shows its base's)."""

    name: str
    doc: str
    owner: Any


def public_entries() -> list[Entry]:
    """Every public function, class, method and property."""
    entries: list[Entry] = []
    augment = [n for n, v in vars(tfpipe.augment).items() if _defined_in(v, tfpipe.augment)]
    homes = [(importlib.import_module(home), names) for home, names in RESULT_TYPES.items()]
    for module, names in [(tfpipe, tfpipe.__all__), (tfpipe.augment, augment), *homes]:
        for name in names:
            value = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(value):
                continue
            qualified = f"{module.__name__}.{name}"
            entries.append(Entry(qualified, inspect.cleandoc(value.__doc__ or ""), value))
            if inspect.isclass(value):
                entries.extend(_members(qualified, value))
    return entries


def returned_classes() -> list[Entry]:
    """The classes public functions return without exporting them (the sources of
    `from_arrays`, ...), with their public methods: their examples run too."""
    entries: list[Entry] = []
    for name in tfpipe.__all__:
        value = getattr(tfpipe, name)
        cls = inspect.signature(value).return_annotation if inspect.isfunction(value) else None
        if isinstance(cls, str):  # postponed annotations: the name, looked up in the module
            cls = getattr(inspect.getmodule(value), cls, None)
        if inspect.isclass(cls) and cls.__name__ not in tfpipe.__all__:
            qualified = f"{cls.__module__}.{cls.__name__}"
            entries.append(Entry(qualified, inspect.cleandoc(cls.__doc__ or ""), cls))
            for base in cls.__mro__[:-1]:
                entries.extend(_members(f"{base.__module__}.{base.__name__}", base))
    return entries


def _defined_in(value: Any, module: Any) -> bool:
    return getattr(value, "__module__", None) == module.__name__


def _members(qualified: str, cls: type) -> Iterator[Entry]:
    """The public methods and properties `cls` itself defines (inherited ones count where
    they are defined), each with its docstring or else the one of the method it overrides."""
    for name, member in vars(cls).items():
        if (name.startswith("_") and name != "__call__") or _function(member) is None:
            continue
        for base in cls.__mro__:
            owner = _function(vars(base).get(name))
            if owner is not None and owner.__doc__:
                yield Entry(f"{qualified}.{name}", inspect.cleandoc(owner.__doc__), owner)
                break
        else:
            yield Entry(f"{qualified}.{name}", "", member)


def _function(member: Any) -> Any:
    """The function behind a method, static or class method, or property; else None."""
    if isinstance(member, staticmethod | classmethod):
        member = member.__func__
    if isinstance(member, property):
        member = member.fget
    return member if inspect.isfunction(member) else None


ENTRIES = public_entries()
# Each docstring with examples runs once, however many names show it.
RUNS = list({id(e.owner): e for e in ENTRIES + returned_classes() if ">>>" in e.doc}.values())


def trains(entry: Entry) -> bool:
    """Whether an example runs `tfpipe.fit`, which takes a few seconds."""
    return any(">>> " in line and "tfpipe.fit(" in line for line in entry.doc.splitlines())


def test_every_public_entry_point_has_an_example() -> None:
    missing = [entry.name for entry in ENTRIES if ">>>" not in entry.doc]
    assert missing == [], f"public names without an `Examples:` section (>>> lines): {missing}"


def test_examples_sit_under_an_example_heading() -> None:
    misplaced = [entry.name for entry in RUNS if "Examples:" not in entry.doc.split(">>>", 1)[0]]
    assert misplaced == []


def where(entry: Entry) -> tuple[str, int]:
    """The source file of a docstring and the 0-based line its text starts on, so that a
    failing example is reported at its line in the file."""
    lines, start = inspect.getsourcelines(entry.owner)
    first = entry.doc.splitlines()[0]
    offset = next((i for i, text in enumerate(lines) if first in text), 0)
    return inspect.getsourcefile(entry.owner) or entry.name, start - 1 + offset


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


@pytest.mark.parametrize(
    "entry",
    [pytest.param(e, marks=[pytest.mark.slow] if trains(e) else []) for e in RUNS],
    ids=[entry.name for entry in RUNS],
)
def test_example_runs(entry: Entry, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(world["root"])
    # tfpipe.fit's probes are timed; shorter ones keep the examples quick, with the same output.
    monkeypatch.setattr(model_probe, "PROBE_SECONDS", 0.05)
    monkeypatch.setattr(fit_module, "INPUT_PROBE_SECONDS", 0.05)
    monkeypatch.setattr(model_probe, "SHORT_STEP_S", 0.0)  # no steps_per_execution trials
    # A seeded tf.data shuffle's order also depends on TensorFlow's global seed, which a test
    # run earlier in this process may have set (keras.utils.set_random_seed in the demo).
    tf.random.set_seed(None)
    globs = {"tfpipe": tfpipe, "np": np, "tf": tf, "keras": keras, "pd": pd}
    globs["model"] = world["model"]
    source_file, line = where(entry)
    test = doctest.DocTestParser().get_doctest(entry.doc, globs, entry.name, source_file, line)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    output: list[str] = []
    runner.run(test, out=output.append)
    assert runner.failures == 0, "".join(output)
