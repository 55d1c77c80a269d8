"""Keras 3 on the JAX backend: TensorFlow reads the data, JAX trains (one subprocess)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from backend_run import run_with_backend

RUN = Path(__file__).with_name("jax_run.py")


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason='JAX is not installed: pip install -e ".[dev]" installs jax[cpu]',
)
def test_loaders_and_fit_train_a_model_on_jax(tmp_path: Path) -> None:
    result = run_with_backend(RUN, "jax", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads(result.stdout.splitlines()[-1])
    assert run["backend"] == "jax"
    assert run["tensorflow_gpus"] == []  # hidden (only meaningful where there is a GPU)
    for trained in ("pipeline_build", "sequence_loader", "fit"):
        losses = run[trained]
        assert len(losses) == 2 and losses[1] < losses[0], (trained, losses)
    report = run["report"]
    assert report["verdict"] in ("input-bound", "compute-bound")
    assert all(rate > 0 for rate in report["rates"])
    note = "Keras trains on jax: TensorFlow reads the data only"
    assert any(line.startswith(note) for line in report["advice"]) and note in report["text"]
    # backup_dir works: an interrupted run resumes at its last backup, then removes them
    assert run["interrupted_at"] == [1, 1]
    assert len(run["resumed"]) == 1 and run["finite"]
    assert run["backups_left"] == []


def test_on_tensorflow_the_model_keeps_its_strategy_and_the_report_no_note() -> None:
    import keras

    from tfpipe.training import backend

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert backend.keras_backend() == "tensorflow" and backend.trains_with_tensorflow()
    assert backend.strategy_of(model) is model.distribute_strategy
    assert backend.notes() == ()
