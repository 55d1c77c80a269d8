"""Shared fixtures: small datasets generated in the test session, never downloaded."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pandas as pd
import pytest

from tfpipe.sources.synthetic import make_image_dataframe, make_image_folder
from tfpipe.training import model_probe

fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function


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
def short_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probes of a few hundred ms before `tfpipe.fit` trains (the model alone, the input
    alone) keep the suite fast; use it where their length is not under test."""
    monkeypatch.setattr(model_probe, "PROBE_SECONDS", 0.2)
    monkeypatch.setattr(fit_module, "INPUT_PROBE_SECONDS", 0.3)
