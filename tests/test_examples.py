"""Every script in examples/ runs on its small default data and does what it says."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import tfpipe

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    """Imports examples/<name>.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_is_tested() -> None:
    scripts = {p.stem for p in EXAMPLES.glob("*.py")}
    assert scripts == {
        "planet_dataframe",
        "planet_tags",
        "land_use_folder",
        "mnist_arrays",
        "plain_tf_records",
        "diagnose_input_bound",
        "data_service",
    }


@pytest.mark.slow
def test_planet_dataframe_trains_two_outputs(tmp_path: Path) -> None:
    metrics = load("planet_dataframe").main(["--workdir", str(tmp_path)])
    csv = (tmp_path / "train-jpg" / "labels.csv").read_text().splitlines()
    assert csv[0] == "image_name,weather,ground"
    assert "['" in csv[1]  # label cells are lists written as strings
    assert {"val_weather_loss", "val_ground_loss"} <= set(metrics)


@pytest.mark.slow
def test_planet_tags_learns_multi_hot_tags(tmp_path: Path) -> None:
    metrics = load("planet_tags").main(["--workdir", str(tmp_path)])
    csv = (tmp_path / "train_classes.csv").read_text().splitlines()
    assert csv[0] == "image_name,tags"
    name, tags = csv[1].split(",")
    assert (tmp_path / "train-jpg" / f"{name}.jpg").is_file() and "." not in name
    info = tfpipe.DatasetInfo.load(tmp_path / "records" / "train")
    assert info.schema["tags"].multi_label and set(tags.split()) <= set(info.schema["tags"].names)
    assert metrics["val_binary_accuracy"] > 0.7  # predicting no tag at all scores about 0.63


@pytest.mark.slow
def test_land_use_folder_learns(tmp_path: Path) -> None:
    metrics = load("land_use_folder").main(["--workdir", str(tmp_path)])
    assert (tmp_path / "records" / "train.json").is_file()
    assert (tmp_path / "records" / "test.json").is_file()
    assert metrics["val_accuracy"] > 0.5  # 3 classes: chance is 0.33


@pytest.mark.slow
def test_mnist_arrays_learns(tmp_path: Path) -> None:
    metrics = load("mnist_arrays").main(["--workdir", str(tmp_path)])
    assert (tmp_path / "validation.json").is_file()
    assert metrics["val_accuracy"] > 0.2  # 10 classes: chance is 0.1


@pytest.mark.slow
def test_plain_tf_records_are_read_through_an_inferred_schema(tmp_path: Path) -> None:
    module = load("plain_tf_records")
    metrics = module.main(["--workdir", str(tmp_path)])
    assert not list(tmp_path.glob("records/*.json"))  # no tfpipe metadata was involved
    assert metrics["accuracy"] > 0.5


@pytest.mark.slow
def test_diagnose_input_bound_reports_both_runs(tmp_path: Path) -> None:
    reports = load("diagnose_input_bound").main(["--workdir", str(tmp_path), "--plot"])
    assert (tmp_path / "report-before.png").stat().st_size > 0
    assert reports["before"].input_kind == "PyDataset"
    assert reports["after"].input_kind == "TFRecords"
    for report in reports.values():
        assert report.verdict in ("input-bound", "compute-bound")
        assert 0.0 <= report.input_wait_fraction <= 1.0


@pytest.mark.slow
def test_an_example_runs_as_a_script(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "mnist_arrays.py"), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "validation accuracy" in result.stdout


def test_size_flag_is_validated() -> None:
    with pytest.raises(SystemExit):
        load("land_use_folder").main(["--size", "huge"])


@pytest.mark.slow
def test_data_service_trains_through_a_local_dispatcher_and_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = load("data_service").main(["--workdir", str(tmp_path), "--epochs", "2"])
    out = capsys.readouterr().out
    assert "tf.data service dispatcher listening at grpc://127.0.0.1:" in out
    assert "tf.data service workers of grpc://127.0.0.1:" in out  # explain() shows the split
    assert "delivered [120, 120] examples" in out  # both epochs: one whole pass each
    assert "loss" in metrics
