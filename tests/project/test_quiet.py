"""Quiet by default: the `tfpipe` command and a script that imports tfpipe before Keras print
none of TensorFlow's start-up lines (CUDA, cuInit, CPU instructions, oneDNN, absl) unless
asked to (`--verbose`, or `TF_CPP_MIN_LOG_LEVEL` set by the user). Each runs in a fresh process,
the only place TensorFlow starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tfpipe

# A line of TensorFlow's C++ logging ("E0000 00:00:... cuda_platform.cc:52] ...") or absl's.
STARTUP_LINE = re.compile(r"^[IWEF]\d{4} |absl::|oneDNN|cuInit|cpu_feature_guard", re.M)
# The README's quick start in small: tfpipe first, then Keras, then a TensorFlow op and a fit.
SCRIPT = """
import tfpipe
import keras
import numpy as np

source = tfpipe.from_arrays({"x": np.zeros((8, 2), np.float32), "label": np.arange(8) % 2})
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(tfpipe.Pipeline(source).batch(4).as_supervised("x", "label").build(), verbose=0)
"""

pytestmark = pytest.mark.slow  # TensorFlow starts in each test's process


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("quiet") / "data"
    source = tfpipe.from_arrays({"x": np.zeros((4, 2), np.float32), "label": np.arange(4) % 2})
    tfpipe.write_tfrecords(source, prefix)
    return prefix


def run(command: list[str], **env: str) -> str:
    """Runs `command` in a fresh process as a user's shell would (no TF_CPP_MIN_LOG_LEVEL
    unless given); its stderr, after checking it succeeded."""
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"} | env
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def tfpipe_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tfpipe", *args]


def test_the_command_prints_no_startup_lines(records: Path) -> None:
    stderr = run(tfpipe_command("inspect", str(records)))
    assert STARTUP_LINE.findall(stderr) == [], stderr


def test_verbose_shows_the_startup_lines(records: Path) -> None:
    stderr = run(tfpipe_command("--verbose", "inspect", str(records)))
    assert STARTUP_LINE.search(stderr), stderr


def test_a_script_importing_tfpipe_before_keras_prints_no_startup_lines() -> None:
    stderr = run([sys.executable, "-c", SCRIPT])
    assert STARTUP_LINE.findall(stderr) == [], stderr


def test_a_level_the_user_set_is_kept() -> None:
    stderr = run([sys.executable, "-c", SCRIPT], TF_CPP_MIN_LOG_LEVEL="0")
    assert STARTUP_LINE.search(stderr), stderr
