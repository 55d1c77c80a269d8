"""The start of a Beam worker process: TensorFlow imported with the garbage collector paused,
and the heap frozen in SDK worker processes only (never in a user's process)."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import sys

import pytest

pytest.importorskip("apache_beam")

import tfpipe.beam
from tfpipe import _gc


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_collector_comes_back_as_it_was_even_after_an_error(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(ZeroDivisionError), _gc.paused():
            assert not gc.isenabled()
            _ = 1 / 0
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("main", [None, "apache_beam.runners.worker.sdk_worker_main"])
def test_only_a_beam_sdk_worker_freezes_its_heap_on_import(
    main: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen: list[bool] = []
    monkeypatch.setattr(_gc, "freeze", lambda: frozen.append(True))  # this process stays as is
    spec = importlib.util.find_spec(main) if main else None
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", spec)
    monkeypatch.setattr(tfpipe, "beam", tfpipe.beam)  # both put back after the test
    monkeypatch.delitem(sys.modules, "tfpipe.beam")
    importlib.import_module("tfpipe.beam")
    assert frozen == ([True] if main else [])
    assert gc.isenabled()
