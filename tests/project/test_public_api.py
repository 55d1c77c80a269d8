"""The public surface of `tfpipe`: one sorted `__all__` of the entry points a user calls, every
name real, nothing private; what they return and raise lives in the modules that make it."""

from __future__ import annotations

import importlib
import types

import pytest

import tfpipe

# What the entry points return and raise: public in the module that makes it, not in `tfpipe`.
RESULT_TYPES = {
    "tfpipe.errors": [
        "DataNotFoundError",
        "DecodeError",
        "EncodeError",
        "SchemaError",
        "SourceError",
        "TfpipeError",
        "TfpipeWarning",
    ],
    "tfpipe.format": ["DatasetInfo", "ShardInfo", "SkippedExample"],
    "tfpipe.records": ["Fault", "VerifyReport"],
    "tfpipe.training": ["FitReport"],
    "tfpipe.distribute": ["DistributedFeed"],
}
MOST_TOP_LEVEL_NAMES = 25


def test_all_is_sorted_and_unique() -> None:
    assert tfpipe.__all__ == sorted(set(tfpipe.__all__))


def test_every_name_in_all_exists() -> None:
    missing = [name for name in tfpipe.__all__ if not hasattr(tfpipe, name)]
    assert missing == []


def test_nothing_private_is_exported() -> None:
    private = [n for n in tfpipe.__all__ if n.startswith("_") and n != "__version__"]
    assert private == []


def test_every_public_attribute_is_in_all() -> None:
    public = {
        name
        for name, value in vars(tfpipe).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - set(tfpipe.__all__) == set()


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    assert tfpipe.__version__ == version("tfpipe")


def test_the_surface_is_small() -> None:
    assert len(tfpipe.__all__) <= MOST_TOP_LEVEL_NAMES


@pytest.mark.parametrize("module", sorted(RESULT_TYPES))
def test_result_types_and_errors_live_where_they_are_made(module: str) -> None:
    home = importlib.import_module(module)
    for name in RESULT_TYPES[module]:
        assert isinstance(getattr(home, name), type)
        assert name not in tfpipe.__all__
        assert not hasattr(tfpipe, name), f"tfpipe.{name} is top level; import it from {module}"


def test_every_error_is_in_the_errors_module() -> None:
    errors = importlib.import_module("tfpipe.errors")
    classes = {name for name, value in vars(errors).items() if isinstance(value, type)}
    assert classes == set(RESULT_TYPES["tfpipe.errors"])


@pytest.mark.parametrize(
    "package", ["features", "format", "sources", "records", "distribute", "loaders", "training"]
)
def test_each_package_exports_its_public_names(package: str) -> None:
    """Each package's `__init__` exports its public names: every name of its `__all__` exists,
    and the result types listed above are among them."""
    home = importlib.import_module(f"tfpipe.{package}")
    assert home.__all__ == sorted(home.__all__)
    assert [name for name in home.__all__ if not hasattr(home, name)] == []
    assert set(RESULT_TYPES.get(home.__name__, [])) <= set(home.__all__)


def test_the_fault_tools_are_public() -> None:
    assert {"locate_fault", "named_errors", "verify"} <= set(tfpipe.__all__)
    assert {"Fault", "VerifyReport"} <= set(tfpipe.records.__all__)
    assert callable(tfpipe.Pipeline.locate_fault)


def test_the_lazy_names_are_the_typed_imports() -> None:
    """`__all__`, the first-use table and the imports type checkers see list the same names,
    each from the same module."""
    import ast
    import importlib
    import inspect
    import types

    tree = ast.parse(inspect.getsource(tfpipe))
    guarded = next(node for node in tree.body if isinstance(node, ast.If))

    def source(module: str, name: str) -> str:
        """Where the lazy table imports `name` from: its module, or itself if a module."""
        value = getattr(importlib.import_module(module), name)
        return value.__name__ if isinstance(value, types.ModuleType) else module

    typed = {
        alias.name: source(node.module, alias.name)
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    assert typed == tfpipe._MODULES
    assert sorted([*typed, "__version__"]) == tfpipe.__all__


def test_importing_the_submodule_fit_keeps_the_function_fit() -> None:
    import sys

    import tfpipe.training.fit

    assert callable(tfpipe.fit) and tfpipe.fit is sys.modules["tfpipe.training.fit"].fit
    assert tfpipe.records is sys.modules["tfpipe.records"]  # submodules stay reachable


def test_the_first_use_of_a_name_stays_light_in_a_fresh_process() -> None:
    """The first use of a public name imports `tfpipe.training.backend`, so the `training`
    package exports only light result types: importing the loaders there made
    `from tfpipe import fs`, run while `tfpipe.sources` imports, cycle back into
    `tfpipe.sources` (an ImportError found in this issue)."""
    import subprocess
    import sys

    code = (
        "import sys, tfpipe.sources.synthetic, tfpipe.training; "
        "print(sorted(m for m in sys.modules if m.startswith('tfpipe.loaders')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
