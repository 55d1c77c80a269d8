"""Runs a script of the tests in a fresh Python, under another Keras backend or with devices
set before TensorFlow starts."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# The backends other than TensorFlow, and how to install what each needs.
INSTALL = {"jax": 'pip install "jax[cpu]"', "torch": "pip install 'tfpipe[torch]'"}


def other_backends() -> list[Any]:
    """`pytest.param`s of "jax" and "torch", each skipped with its install hint when missing."""
    return [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                importlib.util.find_spec(name) is None, reason=f"{name} is not installed: {hint}"
            ),
        )
        for name, hint in INSTALL.items()
    ]


def run_with_backend(script: Path, backend: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python script args...` with `KERAS_BACKEND=backend` and this process's import path,
    its output captured; 300 s at most."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_fresh(code: str, cwd: Path) -> None:
    """Runs `python -c code` in `cwd` (300 s at most), which must print "OK" and end well: for
    what only a fresh process can do (logical CPU devices are set before TensorFlow starts)."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stdout
