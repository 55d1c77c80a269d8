"""write_tfrecords: shards, metadata, shuffle quality, skipped inputs, atomicity, bad inputs."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import (
    DataNotFoundError,
    EncodeError,
    SchemaError,
    SourceError,
    TfpipeError,
    TfpipeWarning,
)
from tfpipe.format.metadata import DatasetInfo
from tfpipe.sources.synthetic import make_image_folder

RGB = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3)


def _read(prefix: Path) -> list[dict[str, Any]]:
    return [{k: v.numpy() for k, v in ex.items()} for ex in tfpipe.read_tfrecords(prefix)]


def _runs(labels: np.ndarray) -> int:
    """The number of runs of equal consecutive labels (3 for a sorted 3-class list)."""
    return 1 + int(np.count_nonzero(labels[1:] != labels[:-1]))


def test_writes_shards_and_metadata(image_folder: Path, tmp_path: Path) -> None:
    src = tfpipe.from_directory(image_folder)
    info = tfpipe.write_tfrecords(src, tmp_path / "out" / "train", progress=False)
    names = sorted(os.listdir(tmp_path / "out"))
    assert names == [f"train-{k:05d}-of-00008.tfrecord" for k in range(8)] + ["train.json"]
    assert info.num_examples == len(src) == sum(s.num_examples for s in info.shards)
    assert [s.num_bytes for s in info.shards] == [f.stat().st_size for f in info.files]
    saved = json.loads((tmp_path / "out" / "train.json").read_text())
    assert saved["class_names"] == {"label": ["circle", "square", "triangle"]}
    assert saved["num_examples"] == len(src) and saved["tfpipe_version"] == tfpipe.__version__
    loaded = DatasetInfo.load(tmp_path / "out" / "train")
    assert loaded.schema == src.schema and loaded.shuffled and loaded.seed == 0


def test_round_trip_of_every_feature_kind(tmp_path: Path) -> None:
    schema = tfpipe.Schema(
        {
            "jpeg": tfpipe.Image(shape=(8, 6, 3), encoding="jpeg", quality=100),
            "png": tfpipe.Image(shape=(8, 6, 3), encoding="png"),
            "raw": tfpipe.Image(shape=(8, 6, 3), encoding="raw"),
            "label": tfpipe.ClassLabel(names=["cat", "dog", "cow"]),
            "tags": tfpipe.ClassLabel(num_classes=4, multi_label=True),
            "box": tfpipe.Tensor(shape=(2, 2), dtype="float32"),
            "points": tfpipe.Tensor(shape=(None, 2), dtype="int64"),
            "caption": tfpipe.Text(),
        }
    )
    source = [
        {
            "jpeg": RGB,
            "png": RGB + i,
            "raw": RGB - i,
            "label": ["cat", "dog", "cow"][i % 3],
            "tags": [i % 4, 3],
            "box": np.full((2, 2), i / 2),
            "points": [[i, 1]] * (i + 1),
            "caption": f"héllo {i}",
        }
        for i in range(5)
    ]
    info = tfpipe.write_tfrecords(
        source, tmp_path / "all", schema=schema, shuffle=False, num_shards=2, progress=False
    )
    assert [s.num_examples for s in info.shards] == [2, 3] and not info.shuffled
    got = _read(tmp_path / "all")
    assert len(got) == 5
    for i, example in enumerate(got):
        assert np.abs(example["jpeg"].astype(int) - RGB).max() <= 8
        np.testing.assert_array_equal(example["png"], RGB + i)
        np.testing.assert_array_equal(example["raw"], RGB - i)
        assert example["label"] == i % 3
        np.testing.assert_array_equal(example["tags"], np.isin(range(4), [i % 4, 3]))
        np.testing.assert_array_equal(example["box"], np.full((2, 2), i / 2, np.float32))
        np.testing.assert_array_equal(example["points"], [[i, 1]] * (i + 1))
        assert example["caption"].decode() == f"héllo {i}"


def test_jpeg_files_are_stored_byte_for_byte(image_folder: Path, tmp_path: Path) -> None:
    src = tfpipe.from_directory(image_folder)
    info = tfpipe.write_tfrecords(src, tmp_path / "train", shuffle=False, progress=False)
    stored = [src.schema.stored(r)["image"] for r in _records(info.files)]
    assert stored == [Path(p).read_bytes() for p in src.paths]


def _records(files: list[Path]) -> list[bytes]:
    from tfpipe.records.infer import records

    return [record for _, _, record in records(files)]


def test_resizes_to_the_declared_shape_with_workers(image_folder: Path, tmp_path: Path) -> None:
    src = tfpipe.from_directory(image_folder, image_shape=(16, 20, 3))
    one = tfpipe.write_tfrecords(src, tmp_path / "one", workers=1, progress=False)
    two = tfpipe.write_tfrecords(src, tmp_path / "two", workers=2, progress=False)
    assert _records(one.files) == _records(two.files)
    assert {ex["image"].shape for ex in _read(tmp_path / "two")} == {(16, 20, 3)}


def test_shuffle_mixes_a_class_sorted_source_like_a_random_permutation(tmp_path: Path) -> None:
    labels = np.repeat(np.arange(3), 200)
    src = tfpipe.from_arrays({"label": labels})
    info = tfpipe.write_tfrecords(src, tmp_path / "mixed", seed=3, progress=False)
    written = np.array([ex["label"] for ex in _read(tmp_path / "mixed")])
    assert sorted(written) == sorted(labels)
    rng = np.random.default_rng(0)
    random_runs = np.array([_runs(rng.permutation(labels)) for _ in range(500)])
    low, high = np.percentile(random_runs, [0.5, 99.5])
    assert low <= _runs(written) <= high, (_runs(written), low, high)
    offsets = np.cumsum([0] + [s.num_examples for s in info.shards])
    for start, end in itertools.pairwise(offsets):
        counts = np.bincount(written[start:end], minlength=3)
        assert counts.min() >= 0.15 * (end - start), counts
    again = tfpipe.write_tfrecords(src, tmp_path / "again", seed=3, progress=False)
    other = tfpipe.write_tfrecords(src, tmp_path / "other", seed=4, progress=False)
    assert _records(again.files) == _records(info.files) != _records(other.files)
    tfpipe.write_tfrecords(src, tmp_path / "sorted", shuffle=False, progress=False)
    assert _runs(np.array([ex["label"] for ex in _read(tmp_path / "sorted")])) == 3


def _folder_with_bad_images(root: Path) -> tuple[Path, Path]:
    make_image_folder(root, num_classes=2, per_class=4, size=(24, 24))
    corrupt = root / "circle" / "corrupt.jpg"
    corrupt.write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    good = next((root / "square").glob("*.jpg"))
    truncated = root / "square" / "truncated.jpg"
    truncated.write_bytes(good.read_bytes()[:200])
    return corrupt, truncated


def test_skip_counts_and_names_unreadable_inputs(tmp_path: Path) -> None:
    corrupt, truncated = _folder_with_bad_images(tmp_path / "images")
    src = tfpipe.from_directory(tmp_path / "images")
    with pytest.warns(TfpipeWarning, match="skipped 2 of 10 examples") as caught:
        info = tfpipe.write_tfrecords(
            src, tmp_path / "out" / "train", on_error="skip", progress=False
        )
    assert "corrupt.jpg" in str(caught[0].message) and "truncated.jpg" in str(caught[0].message)
    assert info.num_examples == 8 and len(_read(tmp_path / "out" / "train")) == 8
    assert sorted(s.origin for s in info.skipped) == [str(corrupt), str(truncated)]
    assert all("image" in s.error for s in info.skipped)
    saved = DatasetInfo.load(tmp_path / "out" / "train")
    assert saved.skipped == info.skipped


@pytest.mark.fault(
    "truncated JPEG file in the source",
    reader="write_tfrecords",
    outcome="EncodeError naming the example and file; no shard left",
)
def test_corrupt_jpeg_raises_naming_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    corrupt, _ = _folder_with_bad_images(tmp_path / "images")
    src = tfpipe.from_directory(tmp_path / "images")
    where = re.escape(f"in example 4 ({corrupt})")
    with pytest.raises(EncodeError, match=rf"^image: .+ {where}$"):
        tfpipe.write_tfrecords(src, tmp_path / "out" / "train", shuffle=False, progress=False)
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_error_midway_removes_the_shards_it_wrote(tmp_path: Path) -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor(dtype="int64")})
    source = [{"x": i} for i in range(80)]
    source[70] = {"x": "bad"}
    with pytest.raises(EncodeError, match="x: expected int64, got 'bad' in example 70"):
        tfpipe.write_tfrecords(
            source, tmp_path / "t", schema=schema, num_shards=4, shuffle=False, progress=False
        )
    assert os.listdir(tmp_path) == []


def test_skipping_everything_is_an_error(tmp_path: Path) -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor(dtype="int64")})
    with pytest.raises(EncodeError, match="every one of the 3 examples was skipped"):
        tfpipe.write_tfrecords(
            [{"x": "a"}] * 3, tmp_path / "t", schema=schema, on_error="skip", progress=False
        )


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ({"x": 1, "label": "cat"}, EncodeError, r"x: expected int64, got 'cat'|label"),
        (
            {"x": "cat", "label": "dog"},
            EncodeError,
            r"x: expected int64, got 'cat' in example 1 \(row 1\)",
        ),
        (
            {"x": 1, "label": "cow"},
            EncodeError,
            r"label: unknown class name 'cow'.* in example 1 \(row 1\)",
        ),
        (
            {"x": 1},
            EncodeError,
            r"example 1 \(row 1\) does not match the schema: "
            r"missing \['label'\]",
        ),
    ],
    ids=["ok", "wrong_dtype", "unknown_class_name", "schema_mismatch"],
)
def test_bad_values_name_the_feature_and_example(
    tmp_path: Path, value: dict[str, Any], error: type[Exception], match: str
) -> None:
    class Rows(list):  # a plain list of examples with an origin for errors
        def origin(self, index: int) -> str:
            return f"row {index}"

    schema = tfpipe.Schema(
        {"x": tfpipe.Tensor(dtype="int64"), "label": tfpipe.ClassLabel(names=["cat", "dog"])}
    )
    source = Rows([{"x": 0, "label": "cat"}, value, {"x": 2, "label": "dog"}])
    if value == {"x": 1, "label": "cat"}:
        assert (
            tfpipe.write_tfrecords(
                source, tmp_path / "t", schema=schema, progress=False
            ).num_examples
            == 3
        )
        return
    with pytest.raises(error, match=match):
        tfpipe.write_tfrecords(source, tmp_path / "t", schema=schema, progress=False)
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_shards": 0}, "num_shards must be a positive int"),
        ({"num_shards": 5}, "num_shards=5 is more than the 3 examples"),
        ({"compression": "lz4"}, "compression must be None, 'gzip' or 'zlib'"),
        ({"workers": 0}, "workers must be a positive int"),
        ({"on_error": "ignore"}, r"on_error must be one of \['raise', 'skip'\]"),
        ({"seed": "abc"}, "seed must be an int"),
        ({"seed": -1}, r"seed must be an int >= 0\. Received: seed=-1"),
        ({"num_shards": True}, "Received: num_shards=True"),
    ],
)
def test_bad_options_name_the_argument(tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    src = tfpipe.from_arrays({"x": np.arange(3.0)})
    with pytest.raises(ValueError, match=match):
        tfpipe.write_tfrecords(src, tmp_path / "t", progress=False, **kwargs)


def test_bad_sources_and_prefixes(tmp_path: Path) -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor()})
    with pytest.raises(SourceError, match="source is empty"):
        tfpipe.write_tfrecords([], tmp_path / "t", schema=schema, progress=False)
    with pytest.raises(SourceError, match="len\\(source\\) and source\\[i\\]"):
        tfpipe.write_tfrecords(iter([{"x": 1.0}]), tmp_path / "t", schema=schema, progress=False)
    with pytest.raises(SchemaError, match=r"list has no \.schema: pass schema="):
        tfpipe.write_tfrecords([{"x": 1.0}], tmp_path / "t", progress=False)
    with pytest.raises(ValueError, match="prefix must name the dataset inside a folder"):
        tfpipe.write_tfrecords([{"x": 1.0}], tmp_path, schema=schema, progress=False)
    with pytest.raises(ValueError, match="without a suffix"):
        tfpipe.write_tfrecords([{"x": 1.0}], tmp_path / "t.json", schema=schema, progress=False)
    with pytest.raises(DataNotFoundError, match=r"root: folder .*missing.* does not exist"):
        tfpipe.from_directory(tmp_path / "missing")


def test_rewrite_removes_stale_shards(tmp_path: Path) -> None:
    src = tfpipe.from_arrays({"x": np.arange(12.0)})
    tfpipe.write_tfrecords(src, tmp_path / "train", num_shards=4, progress=False)
    (tmp_path / "train-extra.txt").write_text("not ours")
    (tmp_path / ".train-00001-of-00004.tfrecord.tmp-99999").write_text("dead write")
    tfpipe.write_tfrecords(
        src, tmp_path / "train", num_shards=2, compression="gzip", progress=False
    )
    assert sorted(os.listdir(tmp_path)) == [
        "train-00000-of-00002.tfrecord.gz",
        "train-00001-of-00002.tfrecord.gz",
        "train-extra.txt",
        "train.json",
    ]
    assert sorted(float(ex["x"]) for ex in _read(tmp_path / "train")) == list(np.arange(12.0))


_SLOW_WRITE = """
import sys, time
import numpy as np
import tfpipe

class Slow:
    schema = tfpipe.Schema({"x": tfpipe.Tensor(dtype="int64")})
    def __len__(self):
        return 40
    def __getitem__(self, i):
        if i >= 30:
            time.sleep(0.3)
        return {"x": i}

tfpipe.write_tfrecords(Slow(), sys.argv[1], num_shards=4, shuffle=False, workers=1,
                       progress=False)
"""


@pytest.mark.slow
@pytest.mark.fault(
    "writer killed with SIGKILL mid-write",
    reader="write_tfrecords",
    outcome="no metadata file; reading the prefix raises DataNotFoundError",
)
@pytest.mark.fault(
    "writer killed over an older dataset of the same shard count",
    reader="read_tfrecords of the folder",
    outcome="DataNotFoundError: shards missing (the older ones went at the first rename)",
)
def test_killed_write_leaves_nothing_that_looks_complete(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    old = tfpipe.from_arrays({"x": np.arange(8)})
    tfpipe.write_tfrecords(old, prefix, num_shards=4, progress=False)
    script = tmp_path / "slow_write.py"
    script.write_text(textwrap.dedent(_SLOW_WRITE))
    process = subprocess.Popen([sys.executable, str(script), str(prefix)])
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".train-00003-of-00004.tfrecord.tmp-*")):
            assert process.poll() is None and time.monotonic() < deadline, "writer never got far"
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not (tmp_path / "train.json").exists()
    finals = {p.name: len(_records([p])) for p in tmp_path.glob("train-*-of-*.tfrecord")}
    assert finals == {  # 3 complete new shards; the old ones went at the first rename
        "train-00000-of-00004.tfrecord": 10,
        "train-00001-of-00004.tfrecord": 10,
        "train-00002-of-00004.tfrecord": 10,
    }
    assert list(tmp_path.glob(".train-00003-of-00004.tfrecord.tmp-*"))
    with pytest.raises(DataNotFoundError, match="interrupted or unfinished write"):
        tfpipe.read_tfrecords(prefix)
    with pytest.raises(DataNotFoundError, match="1 of 4 are missing"):
        tfpipe.read_tfrecords(tmp_path)  # not the old shard 3 beside the new 0..2
    tfpipe.write_tfrecords(old, prefix, num_shards=2, progress=False)
    assert sorted(p.name for p in tmp_path.glob("*train*")) == [
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
        "train.json",
    ]


def test_only_upright_jpegs_of_the_declared_channels_are_copied(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    pixels = np.zeros((8, 12, 3), np.uint8)
    pixels[:, :6] = 255
    exif = PILImage.Exif()
    exif[0x0112] = 6  # rotated: must be turned upright, not copied
    PILImage.fromarray(pixels).save(tmp_path / "a" / "rotated.jpg", exif=exif, quality=100)
    PILImage.fromarray(pixels[..., 0]).save(tmp_path / "a" / "gray.jpg", quality=100)
    PILImage.fromarray(pixels).save(tmp_path / "a" / "plain.jpg", quality=100)
    src = tfpipe.from_directory(tmp_path, class_names=["a"])
    info = tfpipe.write_tfrecords(src, tmp_path / "out" / "t", shuffle=False, progress=False)
    stored = {
        Path(path).name: src.schema.stored(record)["image"]
        for path, record in zip(src.paths, _records(info.files), strict=True)
    }
    assert stored["plain.jpg"] == (tmp_path / "a" / "plain.jpg").read_bytes()
    assert stored["gray.jpg"] != (tmp_path / "a" / "gray.jpg").read_bytes()
    assert stored["rotated.jpg"] != (tmp_path / "a" / "rotated.jpg").read_bytes()
    shapes = {name: tfpipe.Image().load(data).shape for name, data in stored.items()}
    assert shapes == {"plain.jpg": (8, 12, 3), "gray.jpg": (8, 12, 3), "rotated.jpg": (12, 8, 3)}


@pytest.mark.fault(
    "prefix in a folder that cannot be created (a file in the way) or written in (/sys)",
    reader="write_tfrecords, tfpipe write",
    outcome="TfpipeError naming the prefix and its folder; the command: one line, exit 2",
)
def test_a_prefix_that_cannot_be_written_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("not a folder")
    source = tfpipe.from_arrays({"x": np.arange(4)})
    unwritable = [tmp_path / "afile" / "train", Path("/sys/tfpipe-train")]
    for prefix, reason in zip(
        unwritable, ["a file, not a folder", "ermission denied"], strict=True
    ):
        message = rf"prefix '{re.escape(str(prefix))}': cannot write in its folder .*{reason}"
        with pytest.raises(TfpipeError, match=message):
            tfpipe.write_tfrecords(source, prefix, progress=False)
    make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(8, 8))
    assert main(["write", str(tmp_path / "images"), str(unwritable[0])]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"tfpipe write: error: prefix '{unwritable[0]}': cannot write")
    assert "\n" not in error and "Traceback" not in error
