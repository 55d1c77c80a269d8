"""The public surface of `tfpipe`: one sorted `__all__`, every name real, nothing private."""

from __future__ import annotations

import types

import tfpipe


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


def test_the_fault_tools_are_public() -> None:
    names = {"Fault", "VerifyReport", "locate_fault", "named_errors", "verify"}
    assert names <= set(tfpipe.__all__)
    assert callable(tfpipe.Pipeline.locate_fault)
