"""The start of a Beam worker process: TensorFlow imported with the garbage collector paused,
and the heap frozen in SDK worker processes only (never in a user's process); worker
processes write what one process writes."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("apache_beam")

import tfpipe
import tfpipe.beam
from tfpipe.beam import collector
from tfpipe.sources.synthetic import make_image_folder


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_collector_comes_back_as_it_was_even_after_an_error(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(ZeroDivisionError), collector.paused():
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
    monkeypatch.setattr(collector, "freeze", lambda: frozen.append(True))  # this process: as is
    spec = importlib.util.find_spec(main) if main else None
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", spec)
    monkeypatch.setattr(tfpipe, "beam", tfpipe.beam)  # both put back after the test
    monkeypatch.delitem(sys.modules, "tfpipe.beam")
    importlib.import_module("tfpipe.beam")
    assert frozen == ([True] if main else [])
    assert gc.isenabled()


@pytest.mark.parametrize("main", ["missing", "not a module"])
def test_a_host_without_a_main_module_imports_tfpipe_beam(
    main: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen: list[bool] = []
    monkeypatch.setattr(collector, "freeze", lambda: frozen.append(True))
    if main == "missing":
        monkeypatch.delitem(sys.modules, "__main__")
    else:
        monkeypatch.setitem(sys.modules, "__main__", object())
    monkeypatch.setattr(tfpipe, "beam", tfpipe.beam)
    monkeypatch.delitem(sys.modules, "tfpipe.beam")
    assert importlib.import_module("tfpipe.beam").WriteTFRecords
    assert frozen == []


@pytest.mark.slow
def test_worker_processes_write_the_same_shards_as_one_process(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=2, per_class=20, size=(16, 16))
    source = tfpipe.from_directory(folder, image_shape=(16, 16, 3))
    infos = {
        mode: tfpipe.beam.write_tfrecords(
            source,
            tmp_path / mode / "train",
            workers=2 if mode == "processes" else 1,
            args=[] if mode == "processes" else ["--direct_running_mode=in_memory"],
        )
        for mode in ("processes", "in_memory")
    }
    files = {mode: [f.read_bytes() for f in info.files] for mode, info in infos.items()}
    assert infos["processes"].num_examples == 40
    assert files["processes"] == files["in_memory"]  # byte for byte
