"""Runs a script of the tests in a fresh Python under another Keras backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


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
