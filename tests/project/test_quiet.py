"""Quiet by default: the `tfpipe` command and a script that uses tfpipe print none of
TensorFlow's start-up lines (CUDA, cuInit, CPU instructions, oneDNN, absl) on any Keras backend,
whichever of tfpipe and Keras it imports first, unless asked to (`--verbose`, or
`TF_CPP_MIN_LOG_LEVEL` set below 3 by the user). Each runs in a fresh process, the only place
TensorFlow starts.

Keras imports TensorFlow (or JAX, which sets the level to 1) before tfpipe can act, so with
Keras first only the installed package's `tfpipe-quiet.pth`, run when the interpreter starts,
keeps the lines quiet: those tests fail, saying so, in an environment whose tfpipe was installed
before that file existed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

import tfpipe

# A line of TensorFlow's C++ logging ("E0000 00:00:... cuda_platform.cc:52] ...") or absl's.
STARTUP_LINE = re.compile(r"^[IWEF]\d{4} |absl::|oneDNN|cuInit|cpu_feature_guard", re.M)
# The README's quick start in small: the two imports in either order, then a TensorFlow op and
# a fit of a Keras model on a tfpipe Pipeline.
SCRIPT = """
{first}
{second}
import numpy as np

source = tfpipe.from_arrays({{"x": np.zeros((8, 2), np.float32), "label": np.arange(8) % 2}})
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(tfpipe.Pipeline(source).batch(4).as_supervised("x", "label").build(), verbose=0)
"""
TFPIPE_FIRST = SCRIPT.format(first="import tfpipe", second="import keras")
KERAS_FIRST = SCRIPT.format(first="import keras", second="import tfpipe")
# The library each Keras backend needs, and how to install it.
BACKENDS = {
    "tensorflow": ("tensorflow", "pip install tensorflow"),
    "jax": ("jax", "pip install 'jax[cpu]'"),
    "torch": ("torch", "pip install torch"),
}
# The line of the installed tfpipe-quiet.pth (setup.py), and all it may import.
PTH_LINE = "import tfpipe.logs; tfpipe.logs.quiet()"
STARTUP_MODULES = ["tfpipe", "tfpipe.logs"]

pytestmark = pytest.mark.slow  # TensorFlow starts in each test's process


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("quiet") / "data"
    source = tfpipe.from_arrays({"x": np.zeros((4, 2), np.float32), "label": np.arange(4) % 2})
    tfpipe.write_tfrecords(source, prefix)
    return prefix


@pytest.fixture(scope="module")
def started_quiet() -> None:
    """Fails unless this interpreter runs tfpipe's `tfpipe-quiet.pth` when it starts."""
    if not starts_quiet(sys.executable):
        pytest.fail(
            f"{sys.executable} started without running tfpipe-quiet.pth, which the installed "
            "tfpipe puts in site-packages: install tfpipe again (`make clean && make`, or "
            "`uv pip install -e .`)"
        )


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    """A Keras backend whose library is installed."""
    module, install = BACKENDS[request.param]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"Keras's {request.param} backend needs {module}: {install}")
    return str(request.param)


def run(command: list[str], stdout: bool = False, **env: str) -> str:
    """Runs `command` in a fresh process as a user's shell would (no TF_CPP_MIN_LOG_LEVEL
    unless given); its stderr (or stdout), after checking it succeeded."""
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"} | env
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout if stdout else done.stderr


def tfpipe_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tfpipe", *args]


def test_the_command_prints_no_startup_lines(records: Path) -> None:
    stderr = run(tfpipe_command("inspect", str(records)))
    assert STARTUP_LINE.findall(stderr) == [], stderr


def test_verbose_shows_the_startup_lines(records: Path) -> None:
    stderr = run(tfpipe_command("--verbose", "inspect", str(records)))
    assert STARTUP_LINE.search(stderr), stderr


def test_a_script_importing_tfpipe_first_prints_no_startup_lines(backend: str) -> None:
    stderr = run([sys.executable, "-c", TFPIPE_FIRST], KERAS_BACKEND=backend)
    assert STARTUP_LINE.findall(stderr) == [], stderr


def test_a_script_importing_keras_first_prints_no_startup_lines(
    started_quiet: None, backend: str
) -> None:
    stderr = run([sys.executable, "-c", KERAS_FIRST], KERAS_BACKEND=backend)
    assert STARTUP_LINE.findall(stderr) == [], stderr


def test_tfpipe_first_is_quiet_from_a_checkout_without_the_start_up_file(
    tmp_path: Path,
) -> None:
    """Without tfpipe-quiet.pth (a checkout on PYTHONPATH, nothing installed), `import tfpipe`
    quiets TensorFlow. With the PyTorch backend: `import torch._dynamo` searches for
    `tensorflow` before it is imported, which once used up the quieting of its import."""
    pytest.importorskip("torch", reason="Keras's torch backend needs torch: pip install torch")
    python = bare_python(tmp_path)
    checkout = str(Path(tfpipe.__file__).parents[1])
    stderr = run([python, "-c", TFPIPE_FIRST], KERAS_BACKEND="torch", PYTHONPATH=checkout)
    assert STARTUP_LINE.findall(stderr) == [], stderr


def test_a_level_the_user_set_is_kept() -> None:
    stderr = run([sys.executable, "-c", TFPIPE_FIRST], TF_CPP_MIN_LOG_LEVEL="0")
    assert STARTUP_LINE.search(stderr), stderr


def test_a_level_the_user_set_is_kept_with_keras_first_on_jax(started_quiet: None) -> None:
    """JAX, which Keras imports on every backend, sets the level to 1 unless it is set."""
    pytest.importorskip("jax", reason="Keras's jax backend needs jax: pip install 'jax[cpu]'")
    stderr = run([sys.executable, "-c", KERAS_FIRST], KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="0")
    assert STARTUP_LINE.search(stderr), stderr


def test_a_level_the_script_sets_before_keras_is_kept(started_quiet: None) -> None:
    """Set in `os.environ` after the start-up quieted TensorFlow, before it loads."""
    script = f"import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '0'\n{KERAS_FIRST}"
    stderr = run([sys.executable, "-c", script], KERAS_BACKEND="tensorflow")
    assert STARTUP_LINE.search(stderr), stderr


def test_the_start_up_file_imports_nothing_heavy() -> None:
    """Its line runs in every Python process of the environment: it imports tfpipe's package
    and `tfpipe.logs` only (no typing, contextlib or tempfile: 5-15 ms each), in a process
    without `site` (`-S`) that has imported `os` as `site` does."""
    code = f"import os, sys; old = set(sys.modules); {PTH_LINE}; print(*set(sys.modules) - old)"
    checkout = str(Path(tfpipe.__file__).parents[1])
    printed = run([sys.executable, "-S", "-c", code], stdout=True, PYTHONPATH=checkout)
    assert sorted(printed.split()) == STARTUP_MODULES


def starts_quiet(python: str) -> bool:
    """Whether `python` runs tfpipe-quiet.pth when it starts: `tfpipe.logs` is imported and
    TF_CPP_MIN_LOG_LEVEL is 3 before the program's first line."""
    check = "import os, sys; print('tfpipe.logs' in sys.modules, os.environ.get('{}'))"
    printed = run([python, "-c", check.format("TF_CPP_MIN_LOG_LEVEL")], stdout=True)
    return printed.split() == ["True", "3"]


def bare_python(folder: Path) -> str:
    """A fresh virtual environment that sees this one's site-packages (Keras, TensorFlow) but
    not its `.pth` files, tfpipe's among them; its python."""
    venv.create(folder / "venv", with_pip=False)
    python = str(folder / "venv" / "bin" / "python")
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (site_packages(python) / "tfpipe-test-deps.pth").write_text("\n".join(ours) + "\n")
    return python


def site_packages(python: str) -> Path:
    """The site-packages folder of `python`'s environment."""
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(run([python, "-c", where], stdout=True).strip())
