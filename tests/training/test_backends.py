"""Keras 3 on the JAX and PyTorch backends: TensorFlow reads the data, JAX or PyTorch trains
(one subprocess per backend)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from with_backend import other_backends, run_with_backend

RUN = Path(__file__).with_name("backend_run.py")
ONE_STEP = "steps_per_execution stays 1 although steps are short: Keras's PyTorch backend"
SEVERAL_STEPS = "run several steps per call with model.compile(steps_per_execution=N)"


def _train_on(name: str, workdir: Path) -> dict[str, Any]:
    result = run_with_backend(RUN, name, str(workdir))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("name", other_backends())
def test_loaders_and_fit_train_a_model_on_another_backend(name: str, tmp_path: Path) -> None:
    run = _train_on(name, tmp_path)
    assert run["backend"] == name
    assert run["tensorflow_gpus"] == []  # hidden (only meaningful where there is a GPU)
    for trained in ("pipeline_build", "sequence_loader", "fit"):
        losses = run[trained]
        assert len(losses) == 2 and losses[1] < losses[0], (trained, losses)
    assert run["benchmark_examples_per_s"] > 0
    # validation and the user's callback: 24 images in batches of 7, 4 steps an epoch
    # (evaluated each epoch; whether 24 images' validation loss falls in 2 epochs is chance:
    # it rose once in ~10 runs under load, on both backends)
    assert len(run["val_loss"]) == 2 and all(math.isfinite(v) for v in run["val_loss"])
    assert run["callback_calls"] == {"train_batch_end": 8, "epoch_end": 2, "test_end": 2}
    report = run["report"]
    assert report["verdict"] in ("input-bound", "compute-bound")
    assert all(rate > 0 for rate in report["rates"])
    note = f"Keras trains on {name}: TensorFlow reads the data only"
    assert any(line.startswith(note) for line in report["advice"]) and note in report["text"]
    # backup_dir works: an interrupted run resumes at its last backup, then removes them
    assert run["interrupted_at"] == [1, 1]
    assert len(run["resumed"]) == 1 and run["finite"]
    assert run["backups_left"] == []
    # the model probe leaves every variable as it found it
    assert run["probe_restored"] and run["probe_step_s"] > 0
    small = run["small"]
    assert len(small["losses"]) == 2 and all(np.isfinite(small["losses"]))
    if name == "torch":  # Keras's PyTorch trainer runs one step per call
        assert small["report"]["steps_per_execution"] == [1, False]
        assert any(line.startswith(ONE_STEP) for line in small["report"]["advice"])
        assert run["compiled_two"]["error"].startswith(
            "model was compiled with steps_per_execution=2, but Keras trains on torch"
        )
        assert run["compiles_each_batch_shape"] == [False, True]  # torch.compile: jit_compile
        (host,) = run["host_advice"]
        assert "a larger batch" in host and SEVERAL_STEPS not in host
    else:
        assert run["compiled_two"] == {"steps_per_execution": 2}
        assert run["compiles_each_batch_shape"] == [True, True]
        (host,) = run["host_advice"]
        assert host.endswith(SEVERAL_STEPS)


def test_on_tensorflow_the_model_keeps_its_strategy_and_the_report_no_note() -> None:
    import keras

    from tfpipe.training import backend

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert backend.keras_backend() == "tensorflow" and backend.trains_with_tensorflow()
    assert backend.strategy_of(model) is model.distribute_strategy
    assert backend.notes() == ()
    model.compile("sgd", "mse", steps_per_execution=4)
    assert not backend.one_step_per_execution()
    backend.check_steps_per_execution(model)  # several steps per call run on TensorFlow
