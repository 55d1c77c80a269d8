"""Pictures: `FitReport.plot(path)` and `tfpipe bench PATH --plot FILE` (matplotlib optional)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.training.report import FitReport
from tfpipe.training.throughput import Throughput

PNG = b"\x89PNG\r\n\x1a\n"


def report(achieved: float) -> FitReport:
    return FitReport.build(
        input_alone=Throughput(600.0, 18.75, 0.1, 20, 640),
        model_examples_per_s=10_000.0,
        achieved_examples_per_s=achieved,
        input_kind="PyDataset",
        batch_size=32,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
    )


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_fit_report_plot_writes_the_picture(tmp_path: Path, suffix: str) -> None:
    path = report(achieved=550.0).plot(tmp_path / f"report{suffix}")
    assert path == tmp_path / f"report{suffix}"
    data = path.read_bytes()
    if suffix == ".png":
        assert data.startswith(PNG)
    else:
        text = data.decode()
        assert "input alone" in text and "verdict: input-bound" in text  # text kept as text


def test_fit_report_plot_names_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        report(achieved=550.0).plot(tmp_path / "missing" / "report.png")


def test_plot_without_matplotlib_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r'pip install "tfpipe\[plot\]"'):
        report(achieved=550.0).plot(tmp_path / "report.png")
    assert not (tmp_path / "report.png").exists()


@pytest.fixture(scope="module")
def records(image_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tfpipe.from_directory(image_folder, image_shape=(32, 32, 3))
    prefix = tmp_path_factory.mktemp("records") / "train"
    tfpipe.write_tfrecords(source, prefix, progress=False)
    return prefix


def test_bench_plot_draws_the_stages(
    records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    picture = tmp_path / "bench.png"
    status = main(["bench", str(records), "--batches", "2", "--batch-size", "8", "--plot",
                   str(picture)])  # fmt: skip
    assert status == 0
    printed = capsys.readouterr().out
    assert "read bytes alone:" in printed and f"plot: {picture}" in printed
    assert picture.read_bytes().startswith(PNG)


def test_bench_plot_without_matplotlib_is_one_line_error(
    records: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    status = main(["bench", str(records), "--batches", "1", "--plot", str(tmp_path / "b.png")])
    assert status == 2
    assert 'pip install "tfpipe[plot]"' in capsys.readouterr().err
