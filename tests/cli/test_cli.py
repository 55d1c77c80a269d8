"""The `tfpipe` command: write, inspect, demo, and clear one-line errors with exit status 2."""

from __future__ import annotations

import importlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli.demo import DemoResult, run_demo
from tfpipe.cli.parser import main
from tfpipe.format.metadata import DatasetInfo
from tfpipe.sources.synthetic import make_image_dataframe, make_image_folder
from tfpipe.training import model_probe

fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function


def _labels(prefix: Path) -> list[int]:
    return [int(e["label"]) for e in tfpipe.read_tfrecords(prefix).as_numpy_iterator()]


def _assert_one_line_error(err: str, command: str, *fragments: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith("tfpipe")]
    assert len(lines) == 1 and lines[0].startswith(f"tfpipe {command}: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def test_write_folder_with_split_then_inspect(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["--split", "train=0.75,test=0.25", "--shards", "2", "--compression", "gzip"]
    assert main(["write", str(image_folder), str(out), *args, "--image-size", "16x20"]) == 0
    printed = capsys.readouterr().out
    assert "train: 27 examples in 2 shard(s)" in printed
    assert "test: 9 examples in 2 shard(s)" in printed
    train = DatasetInfo.load(out / "train")
    assert train.compression == "gzip" and train.shuffled
    assert [f.name for f in train.files] == [
        "train-00000-of-00002.tfrecord.gz",
        "train-00001-of-00002.tfrecord.gz",
    ]
    assert train.schema["image"] == tfpipe.Image(shape=(16, 20, 3), encoding="raw")
    assert sorted(np.bincount(_labels(out / "test"))) == [3, 3, 3]
    image = next(iter(tfpipe.read_tfrecords(out / "train")))["image"]
    assert tuple(image.shape) == (16, 20, 3)

    assert main(["inspect", str(out)]) == 0
    report = capsys.readouterr().out
    assert "test: 9 examples in 2 shard(s)" in report and "train: 27 examples" in report
    assert "classes of label: circle, square, triangle" in report
    assert report.count("image  uint8 (16, 20, 3) min ") == 2


def test_write_refuses_records_inside_the_image_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second `tfpipe write img img/_records/train` took `_records` for a class."""
    images = make_image_folder(tmp_path / "img", num_classes=2, per_class=2, size=(8, 8))
    for out, more in ((images / "_records" / "train", []), (images / "out", ["--split", "a=1"])):
        assert main(["write", str(images), str(out), *more]) == 2
        _assert_one_line_error(capsys.readouterr().err, "write", "inside the image folder SRC")
    assert sorted(p.name for p in images.iterdir()) == ["circle", "square"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], tfpipe.Image(shape=(None, None, 3), encoding="auto")),
        (["--image-size", "16x20", "--encoding", "jpeg"], tfpipe.Image(shape=(16, 20, 3))),
        (["--encoding", "png"], tfpipe.Image(shape=(None, None, 3), encoding="png")),
    ],
    ids=["default-as-stored", "jpeg-at-size", "png"],
)
def test_write_encoding(
    image_folder: Path, tmp_path: Path, args: list[str], expected: tfpipe.Image
) -> None:
    assert main(["write", str(image_folder), str(tmp_path / "d"), "--shards", "1", *args]) == 0
    assert DatasetInfo.load(tmp_path / "d").schema["image"] == expected


def test_write_keeps_png_files_png(tmp_path: Path) -> None:
    (tmp_path / "img" / "noise").mkdir(parents=True)
    noise = np.random.default_rng(0).integers(0, 256, (12, 10, 3), np.uint8)
    PILImage.fromarray(noise).save(tmp_path / "img" / "noise" / "0.png")
    assert main(["write", str(tmp_path / "img"), str(tmp_path / "d"), "--shards", "1"]) == 0
    [example] = tfpipe.from_tfrecords(tmp_path / "d")
    assert example["image"] == (tmp_path / "img" / "noise" / "0.png").read_bytes()


def test_write_raw_needs_an_image_size(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["write", str(image_folder), str(tmp_path / "d"), "--encoding", "raw"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "write", "raw", "fixed height and width")


def test_write_csv_with_several_label_columns_no_shuffle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = make_image_folder(tmp_path / "imgs", num_classes=2, per_class=3, size=(16, 16))
    df = make_image_dataframe(images).assign(size=[0, 1, 2, 2, 1, 0])
    df.to_csv(images / "all.csv", index=False)
    assert main(["write", str(images / "all.csv"), str(tmp_path / "a" / "data"), "--no-shuffle",
                 "--label-cols", "label,size", "--shards", "1"]) == 0  # fmt: skip
    info = DatasetInfo.load(tmp_path / "a" / "data")
    assert list(info.schema) == ["image", "label", "size"]
    assert info.schema["size"] == tfpipe.ClassLabel(num_classes=3)
    assert not info.shuffled
    assert _labels(tmp_path / "a" / "data") == [0, 0, 0, 1, 1, 1]
    sizes = [int(e["size"]) for e in tfpipe.read_tfrecords(info.files).as_numpy_iterator()]
    assert sizes == [0, 1, 2, 2, 1, 0]
    assert "data: 6 examples in 1 shard(s)" in capsys.readouterr().out

    elsewhere = tmp_path / "lists" / "paths.csv"
    elsewhere.parent.mkdir()
    df.rename(columns={"path": "file"}).to_csv(elsewhere, index=False)
    assert main(["write", str(elsewhere), str(tmp_path / "b"), "--path-col", "file"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "write", "lists/circle", "pass --base-dir")
    assert main(["write", str(elsewhere), str(tmp_path / "b"), "--path-col", "file",
                 "--base-dir", str(images)]) == 0  # fmt: skip
    assert DatasetInfo.load(tmp_path / "b").num_examples == 6


def test_write_splits_multi_label_csvs_stratified_or_at_random(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = make_image_folder(tmp_path / "imgs", num_classes=2, per_class=10, size=(8, 8))
    df = make_image_dataframe(images).assign(tags=["haze water", "clear", "haze", "clear"] * 5)
    df.drop(columns="label").to_csv(images / "tags.csv", index=False)
    argv = ["write", str(images / "tags.csv"), str(tmp_path / "out"), "--label-cols", "tags",
            "--label-sep", " ", "--split", "train=0.5,test=0.5"]  # fmt: skip
    assert main(argv) == 0
    assert "warning" not in capsys.readouterr().err  # stratified by the label sets
    test = tfpipe.read_tfrecords(tmp_path / "out" / "test").as_numpy_iterator()
    clear, haze, water = np.sum([e["tags"] for e in test], axis=0)
    assert (clear, haze) == (5, 5) and water in (2, 3)  # half of 10, 10 and 5
    assert main([*argv, "--no-stratify"]) == 0
    assert main([*argv[:-2], "--no-stratify"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "write", "--no-stratify says how --split")


def test_write_on_error_skip_counts_and_warns(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = make_image_folder(tmp_path / "imgs", num_classes=2, per_class=2, size=(16, 16))
    (images / "circle" / "broken.jpg").write_bytes(b"\xff\xd8\xff not really a jpeg")
    out = tmp_path / "out" / "train"
    assert main(["write", str(images), str(out), "--workers", "1"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "write", "broken.jpg")
    assert not tfpipe.format.naming.metadata_path(out).exists()

    assert main(["write", str(images), str(out), "--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    assert "train: 4 examples" in captured.out and "skipped 1 unreadable input(s)" in captured.out
    assert "tfpipe: warning: write_tfrecords skipped 1 of 5" in captured.err
    assert [s.origin for s in DatasetInfo.load(out).skipped] == [
        str(images / "circle" / "broken.jpg")
    ]


def test_inspect_records_written_by_plain_tensorflow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = io.BytesIO()
    PILImage.new("RGB", (12, 10), (250, 0, 0)).save(buffer, format="JPEG")
    paths = [tmp_path / "plain-a.tfrecord", tmp_path / "plain-b.tfrecord"]
    for path, numbers in zip(paths, [range(3), range(3, 5)], strict=True):
        with tf.io.TFRecordWriter(str(path)) as writer:
            for i in numbers:
                feature = {
                    "image/encoded": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[buffer.getvalue()])
                    ),
                    "image/class/label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[i % 2])
                    ),
                    "score": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, i])),
                    "name": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[b"sample-%d" % i])
                    ),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
    assert main(["inspect", *map(str, paths)]) == 0  # what the shell makes of plain-*.tfrecord
    report = capsys.readouterr().out
    assert "5 records in 2 file(s)" in report and "schema inferred" in report
    assert re.search(r"plain-b.tfrecord +2 records", report)
    assert "ClassLabel(names=None, num_classes=2" in report
    for line in [
        r"image/encoded +uint8 \(10, 12, 3\) min \d+ max \d+",
        r"image/class/label +int64 \(\) = 0\n",
        r"score +float32 \(2,\) min 0\.0 max 0\.5",
        r"name +text 'sample-0'",
        r"image/encoded +Image: its bytes are JPEG images",
        r"image/class/label +ClassLabel: one int64 per record under a key containing 'label'",
        r"score +Tensor: float values \(images stored as floats stay Tensors",
        r"name +Text: bytes that are not JPEG or PNG",
    ]:
        assert re.search(line, report), line


@pytest.mark.fault(
    "a TFRecord file without metadata whose data is damaged after the records sampled for "
    "its schema",
    reader="tfpipe inspect",
    outcome="exit 2, one line naming the record and file; never a count",
)
def test_inspect_names_a_damaged_record_past_the_sampled_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plain.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(150):  # infer_schema samples 100: record 120 is only read to count
            feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[i]))}
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    damaged = bytearray(path.read_bytes())
    frame = len(damaged) // 150  # a float is 4 bytes: every record is as long
    damaged[120 * frame + 16] ^= 0xFF  # a byte of record 120's data: its frame header is whole
    path.write_bytes(bytes(damaged))
    assert main(["inspect", str(path)]) == 2
    _assert_one_line_error(capsys.readouterr().err, "inspect", "record 120 of", str(path))


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["write", "{tmp}/missing", "{tmp}/out"], ["SRC=", "missing' names no data"]),
        (["write", "{tmp}/notes.txt", "{tmp}/out"], ["notes.txt", "not a readable TFRecord"]),
        (["write", "{images}", "{tmp}/out", "--split", "train=0.9,test=0.3"], ["sum to 1"]),
        (  # a library error names the command's flags, not the arguments they set
            ["write", "{tmp}/pairs.csv", "{tmp}/out", "--path-col", "a", "--image-cols", "a,b"],
            ["--path-col and --image-cols: pass one", "Received: --path-col 'a'"],
        ),
        (["write", "{empty}", "{tmp}/out"], ["no class folders of images"]),
        (["inspect", "{tmp}/nothing-here"], ["nothing-here' names no data"]),
        (["inspect", "{tmp}/notes.txt"], ["notes.txt", "not a readable TFRecord"]),
        (["inspect", "{tmp}/no-folder", "--split", "train"], ["no-folder' does not exist"]),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(
    argv: list[str],
    fragments: list[str],
    image_folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "notes.txt").write_text("hello, this is not a TFRecord file at all")
    (tmp_path / "pairs.csv").write_text("a,b,label\nx.jpg,y.jpg,0\n")
    (tmp_path / "empty").mkdir()
    names = {"tmp": tmp_path, "images": image_folder, "empty": tmp_path / "empty"}
    assert main([a.format(**names) for a in argv]) == 2
    _assert_one_line_error(capsys.readouterr().err, argv[0], *fragments)


def test_bench_of_a_folder_names_the_dataset_and_the_flag(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["write", str(image_folder), str(out / "small"), "--image-size", "8x8"]) == 0
    assert main(["write", str(image_folder), str(out / "all")]) == 0  # each image's own size
    capsys.readouterr()
    assert main(["bench", str(out), "--batches", "1"]) == 2
    err = capsys.readouterr().err
    _assert_one_line_error(err, "bench", f"{out / 'all'}: image stored at each image's own size")
    assert "pass --image-size HEIGHTxWIDTH" in err
    assert "Pipeline" not in err and "Image(shape" not in err
    assert main(["bench", str(out), "--batches", "1", "--image-size", "8x8"]) == 0
    assert f"{out / 'all'}: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["write", "src", "out", "--split", "train:0.7"], "argument --split"),
        (["write", "src", "out", "--image-size", "128by128"], "argument --image-size"),
        (["write", "src", "out", "--shards", "0"], "argument --shards: expected a positive"),
        (["write", "src", "out", "--seed", "-1"], "argument --seed: expected an integer >= 0"),
        (["bench", "out/train", "--batch-size", "0"], "argument --batch-size"),
        (["demo", "--size", "huge"], "argument --size"),
        (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_exit_2_with_usage(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert f"error: {fragment}" in capsys.readouterr().err


_WITHOUT_TENSORFLOW = """
import contextlib, io, json, runpy, sys
for argv in (["--help"], ["write", "--help"], ["write", "src", "out", "--shards", "0"]):
    sys.argv = ["tfpipe", *argv]  # as `python -m tfpipe ...` runs
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("tfpipe", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            status = e.code
    print(json.dumps([status, out.getvalue() + err.getvalue()]))
print(json.dumps(["tensorflow" in sys.modules, "keras" in sys.modules]))
"""


def test_help_and_argument_errors_answer_without_tensorflow() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TENSORFLOW],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    (help_status, help_text), (write_status, write_help), (error_status, error), imported = [
        json.loads(line) for line in result.stdout.splitlines()
    ]
    assert help_status == 0 and "service" in help_text
    assert write_status == 0 and "--image-size" in write_help and "--verbose" in write_help
    assert error_status == 2 and "argument --shards: expected a positive integer" in error
    assert imported == [False, False]  # neither TensorFlow nor Keras was imported


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoResult, str]:
    """The whole small demo, once for the module, training its default 40 epochs (test
    accuracy 1.0 after 40; after 20 it was 0.58 in one run, under the 0.6 asserted) with
    tfpipe.fit's probes short, as the `short_probes`
    fixture makes them: its result and what it printed."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model_probe, "PROBE_SECONDS", 0.2)
        patch.setattr(fit_module, "INPUT_PROBE_SECONDS", 0.3)
        workdir = tmp_path_factory.mktemp("demo")
        result = run_demo(workdir, size="small", epochs=40, progress=False, out=out)
    return result, out.getvalue()


@pytest.mark.slow
def test_demo_writes_and_reads_back_and_trains_above_chance(
    demo: tuple[DemoResult, str],
) -> None:
    demo, printed = demo
    train, test = demo.datasets["train"], demo.datasets["test"]
    assert (train.num_examples, test.num_examples) == (96, 24)
    assert train.class_names == {"label": ["circle", "square", "triangle"]}
    assert train.metadata_path == demo.workdir / "records" / "train.json"
    assert demo.example["image"].shape == (64, 64, 3) and demo.example["image"].dtype == np.uint8
    assert demo.read.examples_per_s > 0 and demo.read.batches == 20
    csv = pd.read_csv(demo.csv)
    assert len(csv) == 120 and (demo.workdir / csv["path"][0]).is_file()
    assert sorted(np.bincount(_labels(demo.workdir / "records" / "test"))) == [8, 8, 8]
    assert demo.accuracy > 0.6  # 3 classes: chance is 1/3
    assert "tfpipe.fit report" in printed and "for 40 epochs" in printed
    assert "validation" not in printed  # tested once after training: no advice to validate less
    assert "starts over at each epoch" not in printed  # tfpipe.fit kept one input iterator
    assert "Keras's work between epochs, one input iterator" in printed


@pytest.mark.slow  # the demo fixture trains for 40 epochs
@pytest.mark.usefixtures("short_probes")
def test_demo_command_reuses_its_workdir(
    demo: tuple[DemoResult, str], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = demo[0].workdir
    assert main(["demo", "--workdir", str(workdir), "--size", "small", "--epochs", "1"]) == 0
    printed = capsys.readouterr().out
    for fragment in ["[1] generated 120 JPEGs of 96x96", "train: 96 examples", "test: 24 examples",
                     "image  uint8 (64, 64, 3)", "examples/s", "for 1 epochs"]:  # fmt: skip
        assert fragment in printed
    assert DatasetInfo.load(workdir / "records" / "train").num_examples == 96


def test_demo_refuses_a_folder_it_did_not_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    assert main(["demo", "--workdir", str(tmp_path)]) == 2
    _assert_one_line_error(capsys.readouterr().err, "demo", "was not made by tfpipe demo")
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="size must be one of"):
        run_demo(tmp_path / "new", size="huge")
    with pytest.raises(ValueError, match="epochs"):
        run_demo(tmp_path / "new", epochs=0)


@pytest.mark.slow
def test_installed_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "tfpipe"
    result = subprocess.run(
        [str(script), "inspect", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    _assert_one_line_error(result.stderr, "inspect", "names no data")
    assert len(result.stderr.splitlines()) == 1, result.stderr  # TensorFlow's start-up is quiet


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (
            "num_shards must be a positive int or None. Received: num_shards=0",
            "--shards must be a positive int or None. Received: --shards 0",
        ),
        (
            "image: images of variable size cannot be batched; pass image_size=(height, width)",
            "image: images of variable size cannot be batched; pass --image-size HEIGHTxWIDTH",
        ),
        ("path_col and image_cols: pass one", "--path-col and --image-cols: pass one"),
        (
            "split(stratify=True) ignored: ...; pass stratify=False to split at random",
            "split(stratify=True) ignored: ...; pass --no-stratify to split at random",
        ),
        ("pass base_dir= if the paths are relative", "pass --base-dir if the paths are relative"),
        ("workers must be > 0. Received: workers=0", "workers must be > 0. Received: --workers 0"),
        (  # paths, quoted column names and calls keep their names
            "no file '/data/base_dir/x.jpg' in column 'label_cols' (tfpipe.fit(batch_size=2))",
            "no file '/data/base_dir/x.jpg' in column 'label_cols' (tfpipe.fit(batch_size=2))",
        ),
    ],
)
def test_library_messages_name_the_commands_flags(message: str, shown: str) -> None:
    from tfpipe.cli.parser import _parser, cli_names

    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    flags = {**commands["write"].get_default("flags"), "batch_size": "--batch-size"}
    assert cli_names(message, flags) == shown
