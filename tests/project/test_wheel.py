"""tfpipe installs like a released package: the wheel and sdist build, and the installed wheel
(not the checkout) answers `tfpipe --version`, imports every module, runs the demo and keeps
TensorFlow quiet with Keras imported first; the editable install (`pip install -e .`) puts the
same `tfpipe-quiet.pth` in site-packages.

The wheel goes into a fresh virtual environment that sees this interpreter's site-packages
through a `.pth` file (TensorFlow and the extras come from there, so nothing is downloaded), but
not the checkout: `.pth` files of those site-packages, such as an editable install's, are not
read, and the commands run without PYTHONPATH from a folder outside the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from test_quiet import (
    KERAS_FIRST,
    PTH_LINE,
    STARTUP_LINE,
    bare_python,
    site_packages,
    starts_quiet,
)

import tfpipe

ROOT = Path(__file__).resolve().parents[2]
# Every module the wheel holds, imported; prints where tfpipe was imported from, then what the
# process's first `from tfpipe import beam` gave and the submodules `tfpipe.NAME` does not give.
IMPORT_ALL = """
import importlib, pkgutil, sys, tfpipe
from tfpipe import beam
names = [m.name for m in pkgutil.iter_modules(tfpipe.__path__) if not m.name.startswith("_")]
not_given = [
    name for name in names
    if name not in tfpipe._MODULES and getattr(tfpipe, name) is not sys.modules[f"tfpipe.{name}"]
]
for module in pkgutil.walk_packages(tfpipe.__path__, "tfpipe."):
    if module.name != "tfpipe.__main__":
        importlib.import_module(module.name)
print(tfpipe.__file__)
print(beam.__name__, not_given)
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as `python -m build` makes them for a release
    (without build isolation: the build backend comes from this environment)."""
    pytest.importorskip("build", reason="`build` is in the dev extra: pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check"]
    run([*command, "--outdir", str(out), str(ROOT)], cwd=ROOT, timeout=300)
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh virtual environment with the wheel installed (no deps)."""
    python = bare_python(tmp_path_factory.mktemp("wheel"))
    wheel = next(dist.glob("tfpipe-*.whl"))
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q"]
    run([*pip, str(wheel)], timeout=300)
    return Path(python).parent


def run(
    command: list[str], cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Runs `command` as a user's shell would, without PYTHONPATH or TF_CPP_MIN_LOG_LEVEL;
    fails with its output unless it succeeds."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_and_sdist_hold_the_version_and_the_type_marker(dist: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    sdist = next(dist.glob("*.tar.gz"))
    assert wheel.name.startswith(f"tfpipe-{tfpipe.__version__}-py3-none-any")
    assert sdist.name == f"tfpipe-{tfpipe.__version__}.tar.gz"
    with zipfile.ZipFile(wheel) as wheel_files, tarfile.open(sdist) as sdist_files:
        assert "tfpipe/py.typed" in wheel_files.namelist()
        pth = wheel_files.read("tfpipe-quiet.pth").decode().splitlines()  # at the top
        assert [line for line in pth if not line.startswith("#")] == [PTH_LINE]
        assert f"tfpipe-{tfpipe.__version__}/src/tfpipe/py.typed" in sdist_files.getnames()


def test_the_installed_command_says_its_version(installed: Path, tmp_path: Path) -> None:
    printed = run([str(installed / "tfpipe"), "--version"], cwd=tmp_path).stdout
    assert printed.strip() == f"tfpipe {tfpipe.__version__}"


def test_every_module_imports_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    """Also in this fresh process: `tfpipe.beam` holds Apache Beam as its global `beam`, and
    the first `from tfpipe import beam` of a process (as `tfpipe write --runner` runs it) gave
    that, not `tfpipe.beam`."""
    printed = run([str(installed / "python"), "-c", IMPORT_ALL], cwd=tmp_path, timeout=300).stdout
    where, submodules = printed.splitlines()
    assert Path(where).is_relative_to(installed.parent)
    assert submodules.split() == ["tfpipe.beam", "[]"]


def test_the_installed_demo_runs_quietly(installed: Path, tmp_path: Path) -> None:
    command = [str(installed / "tfpipe"), "demo", "--workdir", "d", "--epochs", "1"]
    done = run(command, cwd=tmp_path, timeout=300)
    assert (tmp_path / "d" / "records" / "train.json").is_file()
    assert "test accuracy" in done.stdout
    assert STARTUP_LINE.findall(done.stderr) == [], done.stderr


def test_the_installed_wheel_is_quiet_with_keras_imported_first(
    installed: Path, tmp_path: Path
) -> None:
    """Keras (its TensorFlow backend) imports TensorFlow before tfpipe: the wheel's
    tfpipe-quiet.pth quieted it when the interpreter started."""
    done = run([str(installed / "python"), "-c", KERAS_FIRST], cwd=tmp_path, timeout=300)
    assert STARTUP_LINE.findall(done.stderr) == [], done.stderr


def test_the_editable_install_runs_the_start_up_file(tmp_path: Path) -> None:
    """`pip install -e .` (setuptools' editable wheel, as `uv pip install -e .` builds it):
    site-packages gets tfpipe-quiet.pth next to setuptools' `__editable__` file, which puts
    `src` on `sys.path` first, and a new interpreter runs it from the checkout."""
    python = bare_python(tmp_path)
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q"]
    run([*pip, "--no-build-isolation", "-e", str(ROOT)], cwd=tmp_path, timeout=300)
    site = site_packages(python)
    assert (site / f"__editable__.tfpipe-{tfpipe.__version__}.pth").is_file()
    assert (site / "tfpipe-quiet.pth").read_text().splitlines()[-1] == PTH_LINE
    assert starts_quiet(python)
    imported = run([python, "-c", "import tfpipe.logs; print(tfpipe.logs.__file__)"], cwd=tmp_path)
    assert Path(imported.stdout.strip()) == ROOT / "src" / "tfpipe" / "logs.py"


def test_a_git_url_installs_the_committed_package(tmp_path: Path) -> None:
    """README's `pip install 'tfpipe @ git+https://...'`, with the checkout's own repository as
    the URL: pip clones the committed tree and builds it (nothing downloaded)."""
    if not (ROOT / ".git").exists():
        pytest.skip("the checkout is not a git repository")
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q"]
    run([*pip, "--target", str(target), f"git+file://{ROOT}"], cwd=tmp_path, timeout=300)
    installed = target / "tfpipe"
    assert (installed / "py.typed").is_file() and (installed / "training" / "fit.py").is_file()
    assert (target / "bin" / "tfpipe").is_file()
    assert next(target.glob("tfpipe-*.dist-info")).name == f"tfpipe-{tfpipe.__version__}.dist-info"
