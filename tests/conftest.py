"""Shared fixtures: small datasets generated in the test session, never downloaded."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pandas as pd
import pytest

from tfpipe.sources.synthetic import make_image_dataframe, make_image_folder


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
