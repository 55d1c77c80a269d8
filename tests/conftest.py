"""Shared fixtures: small datasets generated in the test session, never downloaded."""

from __future__ import annotations

import importlib
import os
import random
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from collection import collect_in_background, no_automatic_full_collections
from probe_lengths import SHORT
from tfpipe.sources.synthetic import make_image_dataframe, make_image_folder

no_automatic_full_collections()


@pytest.fixture(scope="module", autouse=True)
def collect_garbage() -> Iterator[None]:
    """Frees what each test file left in reference cycles when the file ends, in a thread of
    its own: a full collection that frees an autotuned tf.data iterator can block for up to
    60 s (see `collection`). One per file: per test, the collections cost more CPU than they
    saved."""
    yield
    collect_in_background()


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 class folders of 12 JPEGs of 48x40 each (36 images); treat as read-only."""
    return make_image_folder(
        tmp_path_factory.mktemp("images"), num_classes=3, per_class=12, size=(40, 48)
    )


@pytest.fixture(scope="session")
def image_dataframe(image_folder: Path) -> pd.DataFrame:
    """`path` (relative to image_folder) and `label` (class name) of image_folder."""
    return make_image_dataframe(image_folder)


@pytest.fixture
def global_seeds() -> Iterator[None]:
    """For a test that sets global seeds: afterwards TensorFlow's and Keras's are unset again,
    numpy's and Python's generators restored."""
    python, numpy = random.getstate(), np.random.get_state()
    yield
    tf.random.set_seed(None)
    keras.utils.clear_session()  # Keras's global seed
    random.setstate(python)
    np.random.set_state(numpy)


@pytest.fixture
def short_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probes of a few hundred ms (`probe_lengths.SHORT`) keep the suite fast; use it where
    their length is not under test."""
    for module, values in SHORT.items():
        for name, seconds in values.items():
            monkeypatch.setattr(importlib.import_module(module), name, seconds)


# The files that take longest (summed test time in a full run, 2026-11-27), run first: pytest-xdist
# (`--dist loadfile`) hands files to its processes in collection order, so a long file
# collected last kept one process busy for minutes after the other had finished.
LONGEST_FIRST = (
    "training/test_resume.py",
    "project/test_examples.py",
    "training/test_fit.py",
    "loaders/test_data_service.py",
    "test_spark.py",
    "project/test_notebooks.py",
    "features/test_masks.py",
    "cli/test_cli.py",
    "distribute/test_multi_worker.py",
    "beam/test_beam.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Puts the tests of `LONGEST_FIRST` first, in that order; the rest keep theirs."""
    tests = Path(__file__).parent
    moved = [name for name in LONGEST_FIRST if not (tests / name).is_file()]
    if moved:
        raise pytest.UsageError(f"tests/conftest.py: LONGEST_FIRST names no file {moved}")

    def rank(item: pytest.Item) -> int:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's tests keep their order
