"""Every script in examples/ runs on its small default data and does what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import PIL.Image
import pytest

import tfpipe
from example_scripts import EXAMPLES, load
from tfpipe.errors import SourceError
from tfpipe.format.metadata import DatasetInfo
from tfpipe.sources.synthetic import make_segmentation_folder


def test_every_example_is_tested() -> None:
    scripts = {p.stem for p in EXAMPLES.glob("*.py")}
    assert scripts == {
        "planet_dataframe",
        "planet_tags",
        "land_use_folder",
        "mnist_arrays",
        "plain_tf_records",
        "diagnose_input_bound",
        "segmentation",
        "multi_worker",
        "data_service",
        "grain_and_torch",
        "mixing_and_echoing",
    }


def test_multi_worker_counts_each_epoch_over_workers() -> None:
    """The launcher's bookkeeping; tests/distribute/test_multi_worker.py runs the workers."""
    module = load("multi_worker")
    config = module.tf_config([1001, 1002], 1)
    assert '"worker": ["127.0.0.1:1001", "127.0.0.1:1002"]' in config and '"index": 1' in config
    results = [
        {"by_record": {"ids": {"0": [0, 2]}, "steps": 1}},
        {"by_record": {"ids": {"0": [1, 2]}, "steps": 1}},
    ]
    summary = module.summarize(results, examples=5)
    assert summary == {
        "by_record": {"steps": [1, 1], "epochs": {"0": {"used": 4, "twice": 1, "left_out": 2}}}
    }


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes", "global_seeds")  # the example seeds its weights
def test_mixing_and_echoing_reports_sources_and_echo(tmp_path: Path) -> None:
    reports = load("mixing_and_echoing").main(["--workdir", str(tmp_path), "--epochs", "1"])
    mixed, echoed = reports.values()
    assert [s.examples_share for s in mixed.sources] == [0.5, 0.5]
    assert (mixed.echo_factor, echoed.echo_factor) == (1, 2)
    assert echoed.fresh_examples_per_s == pytest.approx(echoed.achieved_examples_per_s / 2)


@pytest.mark.slow
def test_planet_dataframe_trains_two_outputs(tmp_path: Path) -> None:
    metrics = load("planet_dataframe").main(["--workdir", str(tmp_path)])
    csv = (tmp_path / "train-jpg" / "labels.csv").read_text().splitlines()
    assert csv[0] == "image_name,weather,ground"
    assert "['" in csv[1]  # label cells are lists written as strings
    assert {"val_weather_loss", "val_ground_loss"} <= set(metrics)


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes", "global_seeds")  # the example seeds its weights
def test_planet_tags_learns_multi_hot_tags(tmp_path: Path) -> None:
    metrics = load("planet_tags").main(["--workdir", str(tmp_path)])
    csv = (tmp_path / "train_classes.csv").read_text().splitlines()
    assert csv[0] == "image_name,tags"
    name, tags = csv[1].split(",")
    assert (tmp_path / "train-jpg" / f"{name}.jpg").is_file() and "." not in name
    info = DatasetInfo.load(tmp_path / "records" / "train")
    assert info.schema["tags"].multi_label and set(tags.split()) <= set(info.schema["tags"].names)
    assert metrics["val_binary_accuracy"] > 0.7  # predicting no tag at all scores about 0.63


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes", "global_seeds")  # the example seeds its weights
def test_segmentation_keeps_mask_values_and_beats_all_background(tmp_path: Path) -> None:
    metrics = load("segmentation").main(["--workdir", str(tmp_path), "--epochs", "2"])
    masks = {  # the exact bytes of every mask file the example drew
        np.asarray(PIL.Image.open(path)).tobytes() for path in tmp_path.glob("data/masks/*.png")
    }
    seen = 0
    for part in ("train", "validation"):
        assert (tmp_path / "records" / f"{part}.json").is_file()
        for example in tfpipe.read_tfrecords(tmp_path / "records" / part):
            mask = example["mask"].numpy()
            assert mask.dtype == np.uint8 and mask.shape == (96, 96, 1)
            assert mask[..., 0].tobytes() in masks  # the values of one file, exactly
            seen += 1
    assert seen == len(masks) == 160
    assert metrics["background_mean_iou"] < 0.25  # background only: about 0.8 of 4 classes
    assert metrics["val_mean_iou"] > metrics["background_mean_iou"] + 0.1


def test_segmentation_refuses_an_image_without_its_mask(tmp_path: Path) -> None:
    pair_by_stem = load("segmentation").pair_by_stem
    root = make_segmentation_folder(tmp_path, count=3)
    assert list(pair_by_stem(root / "images", root / "masks")["mask"]) == [
        f"masks/0000{i}.png" for i in range(3)
    ]
    (root / "masks" / "00001.png").unlink()
    with pytest.raises(SourceError, match=r"images/00001\.jpg has no partner"):
        pair_by_stem(root / "images", root / "masks")
    (root / "images" / "00001.png").write_bytes(b"")  # a second file of stem 00001
    with pytest.raises(SourceError, match=r"00001\.jpg and .*00001\.png have the same"):
        pair_by_stem(root / "images", root / "masks")


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes", "global_seeds")  # the example seeds its weights
def test_land_use_folder_learns(tmp_path: Path) -> None:
    metrics = load("land_use_folder").main(["--workdir", str(tmp_path), "--epochs", "2"])
    assert (tmp_path / "records" / "train.json").is_file()
    assert (tmp_path / "records" / "test.json").is_file()
    assert metrics["val_accuracy"] > 0.5  # 3 classes: chance is 0.33


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes", "global_seeds")  # the example seeds its weights
def test_plain_tf_records_are_read_through_an_inferred_schema(tmp_path: Path) -> None:
    module = load("plain_tf_records")
    metrics = module.main(["--workdir", str(tmp_path)])
    assert not list(tmp_path.glob("records/*.json"))  # no tfpipe metadata was involved
    assert metrics["accuracy"] > 0.5


@pytest.mark.slow
def test_diagnose_input_bound_reports_both_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("diagnose_input_bound")
    reports = module.main(["--workdir", str(tmp_path), "--plot"])
    assert (tmp_path / "report-before.png").stat().st_size > 0
    before, after = reports["before"], reports["after"]
    assert before.input_kind == "PyDataset"
    assert (after.input_kind, after.image_encoding) == ("TFRecords", "raw")  # the advice taken
    assert after.input_examples_per_s > before.input_examples_per_s
    for report in reports.values():
        assert report.verdict in ("input-bound", "compute-bound")
        assert 0.0 <= report.input_wait_fraction <= 1.0
    last = module.what_is_left(after)
    assert last in capsys.readouterr().out.splitlines()  # the verdict it got, said as it is
    if after.verdict == "input-bound":
        assert last.startswith("still input-bound") and "left to try" in last
        assert not any("store raw pixels" in advice for advice in after.advice)
    else:
        assert last.startswith("now compute-bound")


@pytest.mark.slow
def test_mnist_arrays_runs_as_a_script_and_learns(tmp_path: Path) -> None:
    """One run, as a user starts it: the script's own process, its printed accuracy."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "mnist_arrays.py"), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "validation.json").is_file()
    accuracy = re.search(r"^validation accuracy (\d\.\d+) ", result.stdout, re.M)
    assert accuracy, result.stdout[-2000:]
    assert float(accuracy.group(1)) > 0.2  # 10 classes: chance is 0.1


@pytest.mark.slow
def test_grain_and_torch_read_every_example_and_grain_trains(tmp_path: Path) -> None:
    pytest.importorskip("grain", reason="Grain is not installed: pip install 'tfpipe[grain]'")
    pytest.importorskip("torch", reason="PyTorch is not installed: pip install torch")
    results = load("grain_and_torch").main(["--workdir", str(tmp_path)])
    assert results["examples"] == results["torch_examples"] == 120
    losses = results["grain_losses"]
    assert len(losses) == 3 and losses[-1] < losses[0], losses


def test_size_flag_is_validated() -> None:
    with pytest.raises(SystemExit):
        load("land_use_folder").main(["--size", "huge"])


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes")
def test_data_service_trains_through_a_local_dispatcher_and_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = load("data_service").main(["--workdir", str(tmp_path), "--epochs", "2"])
    out = capsys.readouterr().out
    assert "tf.data service dispatcher listening at grpc://127.0.0.1:" in out
    assert "tf.data service workers of grpc://127.0.0.1:" in out  # explain() shows the split
    assert "delivered [120, 120] examples" in out  # both epochs: one whole pass each
    assert "loss" in metrics
