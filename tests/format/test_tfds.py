"""TensorFlow Datasets both ways: prepared TFDS folders read without TFDS, and tfpipe output that
`tfds.builder_from_directory` loads.

A folder laid out as TFDS lays it out (`dataset_info.json`, `features.json`, `label.labels.txt`,
shards `tiny-train.tfrecord-00000-of-00002`) is made by hand here, so the reading tests run
without TFDS; the tests marked by `needs_tfds` check the same against a dataset TFDS itself
prepares (a tiny builder, no download) and against TFDS reading tfpipe's output.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import DataNotFoundError, SchemaError, SourceError
from tfpipe.format.metadata import DatasetInfo

NAMES = ["cat", "dog", "bird"]
SPLITS = {"train": [3, 2], "test": [2]}  # records per shard


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _example(i: int) -> dict[str, Any]:
    return {
        "image": np.full((4, 5, 3), i * 10, np.uint8),
        "label": i % 3,
        "vec": np.arange(3, dtype=np.float32) + i,
        "text": f"t{i}",
        "meta": {"id": i, "score": i / 2},
    }


def _record(example: dict[str, Any]) -> bytes:
    """One record as TFDS's example_serializer writes it (nested keys joined with "/")."""
    f = tf.train.Feature
    feature = {
        "image": f(bytes_list=tf.train.BytesList(value=[_png(example["image"])])),
        "label": f(int64_list=tf.train.Int64List(value=[example["label"]])),
        "vec": f(float_list=tf.train.FloatList(value=example["vec"])),
        "text": f(bytes_list=tf.train.BytesList(value=[example["text"].encode()])),
        "meta/id": f(int64_list=tf.train.Int64List(value=[example["meta"]["id"]])),
        "meta/score": f(float_list=tf.train.FloatList(value=[example["meta"]["score"]])),
    }
    proto = tf.train.Example(features=tf.train.Features(feature=feature))
    return proto.SerializeToString()


def _tensor(dtype: str, dims: list[str]) -> dict[str, Any]:
    shape = {"dimensions": dims} if dims else {}
    return {
        "pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
        "tensor": {"dtype": dtype, "encoding": "none", "shape": shape},
    }


FEATURES = {
    "featuresDict": {
        "features": {
            "image": {
                "image": {"dtype": "uint8", "shape": {"dimensions": ["4", "5", "3"]}},
                "pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
            },
            "label": {
                "classLabel": {"numClasses": "3"},
                "pythonClassName": (
                    "tensorflow_datasets.core.features.class_label_feature.ClassLabel"
                ),
            },
            "vec": _tensor("float32", ["3"]),
            "text": {
                "pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                "text": {},
            },
            "meta": {
                "featuresDict": {
                    "features": {"id": _tensor("int64", []), "score": _tensor("float32", [])}
                },
                "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            },
        }
    },
    "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
}


@pytest.fixture
def tfds_folder(tmp_path: Path) -> Path:
    """A prepared TFDS folder `tiny/1.0.0` with a train split (2 shards) and a test split,
    written as TFDS 4.9 writes one."""
    folder = tmp_path / "tiny" / "1.0.0"
    folder.mkdir(parents=True)
    splits, number = [], 0
    for split, lengths in SPLITS.items():
        payload = 0
        for k, length in enumerate(lengths):
            path = folder / f"tiny-{split}.tfrecord-{k:05d}-of-{len(lengths):05d}"
            with tf.io.TFRecordWriter(str(path)) as writer:
                for _ in range(length):
                    record = _record(_example(number))
                    writer.write(record)
                    payload += len(record)
                    number += 1
        splits.append(
            {
                "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
                "name": split,
                "numBytes": str(payload),
                "shardLengths": [str(n) for n in lengths],
            }
        )
    info = {"fileFormat": "tfrecord", "name": "tiny", "splits": splits, "version": "1.0.0"}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    (folder / "features.json").write_text(json.dumps(FEATURES))
    (folder / "label.labels.txt").write_text("".join(f"{n}\n" for n in NAMES))
    return folder


def _check_examples(examples: list[dict[str, Any]], numbers: range) -> None:
    assert len(examples) == len(numbers)
    for example, i in zip(examples, numbers, strict=True):
        expected = _example(i)
        np.testing.assert_array_equal(example["image"], expected["image"])
        assert int(example["label"]) == expected["label"]
        np.testing.assert_array_equal(example["vec"], expected["vec"])
        assert example["text"] == expected["text"].encode()
        assert int(example["meta/id"]) == i
        assert float(example["meta/score"]) == pytest.approx(i / 2)


@pytest.mark.slow  # the first trace of a PNG decode in a tf.data map
def test_reads_a_tfds_folder_by_split_without_tfds(
    tfds_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # importing it would fail
    schema = DatasetInfo.load(tfds_folder / "tiny-train").schema
    assert schema == tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(4, 5, 3), encoding="auto"),  # TFDS: no format given
            "label": tfpipe.ClassLabel(names=NAMES),
            "vec": tfpipe.Tensor(shape=(3,), dtype="float32"),
            "text": tfpipe.Text(),
            "meta/id": tfpipe.Tensor(shape=(), dtype="int64"),
            "meta/score": tfpipe.Tensor(shape=(), dtype="float32"),
        }
    )
    train = tfpipe.read_tfrecords(tfds_folder, split="train")
    assert len(train) == 5
    _check_examples(list(train.as_numpy_iterator()), range(5))

    source = tfpipe.from_tfrecords(tfds_folder / "tiny-test")  # the split named by its path
    test = [source.schema.load(source[i]) for i in range(len(source))]
    _check_examples([{**e, "text": str(e["text"]).encode()} for e in test], range(5, 7))
    batch = next(iter(tfpipe.Pipeline(tfds_folder, split="train").batch(5).build()))
    assert batch["image"].shape == (5, 4, 5, 3) and batch["label"].dtype == tf.int64


def test_inspect_shows_each_split_of_a_tfds_folder(
    tfds_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features = json.loads((tfds_folder / "features.json").read_text())
    del features["featuresDict"]["features"]["image"]  # read the rest only: quicker
    (tfds_folder / "features.json").write_text(json.dumps(features))
    assert main(["inspect", str(tfds_folder), "--split", "train"]) == 0
    out = capsys.readouterr().out
    assert "tiny-train: 5 examples in 2 shard(s)" in out and "tiny-test" not in out
    assert "classes of label: cat, dog, bird" in out and "meta/score  float32 () = 0.0" in out
    assert main(["inspect", str(tfds_folder)]) == 0  # every split, each on its own
    out = capsys.readouterr().out
    assert "tiny-train: 5 examples" in out and "tiny-test: 2 examples" in out


@pytest.mark.fault(
    "a TFDS folder with several splits read without naming one",
    reader="read_tfrecords, Pipeline, from_tfrecords",
    outcome="SourceError listing the splits (never merged)",
)
def test_a_folder_of_several_splits_is_never_merged(tfds_folder: Path) -> None:
    message = r"splits \['train', 'test'\]; reading the folder would merge them"
    for read in (tfpipe.read_tfrecords, tfpipe.Pipeline, tfpipe.from_tfrecords):
        with pytest.raises(SourceError, match=message):
            read(tfds_folder)
    with pytest.raises(DataNotFoundError, match=r"no split 'valid'; its splits are"):
        tfpipe.read_tfrecords(tfds_folder, split="valid")


@pytest.mark.fault(
    "a glob matching the shards of several splits of a TFDS folder",
    reader="read_tfrecords, Pipeline, from_tfrecords, verify",
    outcome="SourceError naming the splits (never merged)",
)
def test_a_glob_over_several_splits_is_never_merged(tfds_folder: Path, tmp_path: Path) -> None:
    written = tmp_path / "written"  # a tfds_compatible write: tfpipe's shard names
    _write(written, "train", 4)
    _write(written, "test", 2)
    reads = (
        tfpipe.read_tfrecords,
        tfpipe.Pipeline,
        lambda path: tfpipe.from_tfrecords(path, schema=_schema()),
        lambda path: tfpipe.verify(path, progress=False),
    )
    for pattern in (
        f"{tfds_folder}/tiny-*.tfrecord-*",
        f"{tfds_folder}/*",
        f"{written}/*.tfrecord",
        f"{written}/*-00000-of-00002.tfrecord",
    ):
        for read in reads:
            with pytest.raises(SourceError, match=r"the splits \['test', 'train'\] of"):
                read(pattern)
    assert len(tfpipe.read_tfrecords(f"{tfds_folder}/tiny-train.tfrecord-*")) == 5
    assert len(tfpipe.from_tfrecords(f"{written}/train-*")) == 4
    both = [written / "train", written / "test"]  # a list of splits combines them on purpose
    assert len(tfpipe.read_tfrecords(both)) == 6


HUGGING_FACE_INFO = {  # the shape of a Hugging Face `datasets` dataset_info.json
    "description": "numbers",
    "features": {"x": {"dtype": "float32", "_type": "Value"}},
    "splits": {"train": {"name": "train", "num_bytes": 36, "num_examples": 3}},
}


def test_another_tools_dataset_info_json_is_not_tfds(tmp_path: Path) -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor()})
    numbers = tfpipe.from_arrays({"x": np.arange(3.0)}, schema)
    tfpipe.write_tfrecords(numbers, tmp_path / "train", num_shards=2, progress=False)
    info_file = tmp_path / "dataset_info.json"
    for info in (HUGGING_FACE_INFO, {"description": "numbers", "features": {}}):
        info_file.write_text(json.dumps(info))
        for path in (tmp_path / "train", f"{tmp_path}/*.tfrecord", tmp_path):
            assert len(tfpipe.read_tfrecords(path)) == 3
        assert len(tfpipe.from_tfrecords(tmp_path, split="train")) == 3
        before = _contents(tmp_path)
        with pytest.raises(SchemaError, match=r"dataset_info.json' is not a TFDS data"):
            tfpipe.write_tfrecords(
                numbers, tmp_path / "test", num_shards=1, progress=False, tfds_compatible=True
            )
        assert _contents(tmp_path) == before


@pytest.mark.fault(
    "dataset_info.json (or features.json) of a TFDS folder passed as the path",
    reader="read_tfrecords, from_tfrecords, DatasetInfo.load",
    outcome="read as its folder (SourceError listing several splits); features.json: "
    "SourceError naming it",
)
def test_dataset_info_json_reads_as_its_folder(tfds_folder: Path, tmp_path: Path) -> None:
    info_file = tfds_folder / "dataset_info.json"
    assert len(tfpipe.read_tfrecords(info_file, split="train")) == 5
    assert len(tfpipe.from_tfrecords(info_file, split="test")) == 2
    for read in (tfpipe.read_tfrecords, tfpipe.from_tfrecords, DatasetInfo.load):
        with pytest.raises(SourceError, match=r"the splits \['train', 'test'\]; reading"):
            read(info_file)
        with pytest.raises(SourceError, match=r"features.json' is the feature tree of"):
            read(tfds_folder / "features.json")
    _write(tmp_path, "train", 4)
    assert DatasetInfo.load(tmp_path / "dataset_info.json").num_examples == 4
    assert len(tfpipe.read_tfrecords(tmp_path / "dataset_info.json")) == 4


@pytest.mark.fault(
    "a TFDS shard shorter than dataset_info.json lists",
    reader="read_tfrecords, from_tfrecords",
    outcome="SourceError naming the shard, records found and listed",
)
def test_a_short_tfds_shard_is_named(tfds_folder: Path) -> None:
    shard = tfds_folder / "tiny-train.tfrecord-00000-of-00002"
    records = list(tf.data.TFRecordDataset(str(shard)).as_numpy_iterator())
    with tf.io.TFRecordWriter(str(shard)) as writer:
        for record in records[:-1]:  # one record fewer, every frame whole
            writer.write(record)
    message = rf"{shard.name}' holds 2 records, but .*dataset_info.json' lists 3 .* short"
    for read in (tfpipe.read_tfrecords, tfpipe.from_tfrecords):
        with pytest.raises(SourceError, match=message):
            read(tfds_folder, split="train")
    assert len(tfpipe.read_tfrecords(tfds_folder, split="test")) == 2  # the other split reads


@pytest.mark.fault(
    "a TFDS split that lists no shardLengths (older TFDS metadata)",
    reader="read_tfrecords",
    outcome="SchemaError naming dataset_info.json and the split; never zero examples",
)
def test_a_split_without_shard_lengths_is_refused(tfds_folder: Path) -> None:
    info_file = tfds_folder / "dataset_info.json"
    info = json.loads(info_file.read_text())
    for split in info["splits"]:
        split.pop("shardLengths")
    info_file.write_text(json.dumps(info))
    with pytest.raises(SchemaError, match=r"dataset_info.json.*'train' lists no shardL"):
        tfpipe.read_tfrecords(tfds_folder, split="train")


@pytest.mark.fault(
    "a TFDS shard cut inside a record, or missing",
    reader="read_tfrecords",
    outcome="SourceError: truncated; DataNotFoundError naming the missing shard",
)
def test_a_truncated_or_missing_tfds_shard_is_named(tfds_folder: Path) -> None:
    shard = tfds_folder / "tiny-train.tfrecord-00001-of-00002"
    shard.write_bytes(shard.read_bytes()[:-7])
    truncated = rf"{shard.name}' is truncated or corrupt at byte offset \d+ \(record 1\)"
    with pytest.raises(SourceError, match=truncated):
        tfpipe.read_tfrecords(tfds_folder / "tiny-train")
    shard.unlink()
    with pytest.raises(DataNotFoundError, match=r"1 of the 2 shards of split 'train'"):
        tfpipe.read_tfrecords(tfds_folder, split="train")


def test_unsupported_tfds_features_are_named(tfds_folder: Path) -> None:
    features = json.loads((tfds_folder / "features.json").read_text())
    features["featuresDict"]["features"]["vec"] = {
        "audio": {"dtype": "int64", "shape": {"dimensions": ["-1"]}, "sampleRate": "16000"},
        "pythonClassName": "tensorflow_datasets.core.features.audio_feature.Audio",
    }
    (tfds_folder / "features.json").write_text(json.dumps(features))
    with pytest.raises(SchemaError, match=r"TFDS feature 'vec' .*Audio.* kind 'audio'"):
        tfpipe.read_tfrecords(tfds_folder, split="train")
    info = json.loads((tfds_folder / "dataset_info.json").read_text())
    (tfds_folder / "dataset_info.json").write_text(json.dumps({**info, "fileFormat": "parquet"}))
    with pytest.raises(SchemaError, match=r"stored as 'parquet'.* reads TFRecord only"):
        tfpipe.read_tfrecords(tfds_folder, split="train")


def _schema() -> tfpipe.Schema:
    return tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(4, 5, 3), encoding="png"),
            "label": tfpipe.ClassLabel(names=NAMES),
            "vec": tfpipe.Tensor(shape=(3,), dtype="float32"),
            "var": tfpipe.Tensor(shape=(None, 2), dtype="int32"),
            "raw": tfpipe.Image(shape=(2, 2, 1), encoding="raw"),
            "photo": tfpipe.Image(shape=(4, 5, 3), encoding="auto"),
            "exact": tfpipe.Tensor(shape=(2,), dtype="float64", encoding="bytes"),
            "text": tfpipe.Text(),
            "meta/id": tfpipe.Tensor(shape=(), dtype="int64"),
        }
    )


def _flat_examples(count: int) -> list[dict[str, Any]]:
    return [
        {
            **{k: v for k, v in _example(i).items() if k != "meta"},
            "var": np.full((i % 3, 2), i, np.int32),
            "raw": np.full((2, 2, 1), 255 - i, np.uint8),
            "photo": np.full((4, 5, 3), 200 - i, np.uint8),
            "exact": np.array([i / 3, 1e300]),
            "meta/id": i,
        }
        for i in range(count)
    ]


def _write(folder: Path, split: str, count: int) -> DatasetInfo:
    return tfpipe.write_tfrecords(
        tfpipe.from_arrays(
            {name: [e[name] for e in _flat_examples(count)] for name in _schema()}, _schema()
        ),
        folder / split,
        num_shards=2,
        shuffle=False,
        progress=False,
        tfds_compatible=True,
    )


def _tfds_files_only(tmp_path: Path) -> Path:
    """A tfds_compatible write of a train and a test split, copied without tfpipe's own files
    (`train.json`, `test.json`, the hidden lock files): only what TFDS itself writes."""
    _write(tmp_path / "written", "train", 6)
    _write(tmp_path / "written", "test", 3)
    folder = tmp_path / "tfds_only"
    folder.mkdir()
    tfpipe_files = {"train.json", "test.json"}
    for file in (tmp_path / "written").iterdir():
        if file.name not in tfpipe_files and not file.name.startswith("."):
            (folder / file.name).write_bytes(file.read_bytes())
    shards = [f"{s}-{k:05d}-of-00002.tfrecord" for s in ("train", "test") for k in range(2)]
    files = {"dataset_info.json", "features.json", "label.labels.txt", *shards}
    assert {p.name for p in folder.iterdir()} == files
    return folder


def test_tfds_compatible_write_reads_back_in_tfpipe(tmp_path: Path) -> None:
    folder = _tfds_files_only(tmp_path)
    info = json.loads((folder / "dataset_info.json").read_text())
    assert [s["name"] for s in info["splits"]] == ["train", "test"]
    assert (folder / "label.labels.txt").read_text().split() == NAMES
    with pytest.raises(SourceError, match=r"splits \['train', 'test'\]"):
        tfpipe.read_tfrecords(folder)
    test = list(tfpipe.read_tfrecords(folder, split="test").as_numpy_iterator())
    assert [int(e["meta/id"]) for e in test] == [0, 1, 2]
    train = tfpipe.from_tfrecords(folder / "train")  # the split named by its path
    assert DatasetInfo.load(folder / "train").class_names == {"label": NAMES}
    photo = json.loads((folder / "features.json").read_text())["featuresDict"]["features"]
    assert "encodingFormat" not in photo["photo"]["image"]  # TFDS's "as the file came"
    assert train.schema["photo"] == _schema()["photo"]
    assert [int(train.schema.load(train[i])["meta/id"]) for i in range(len(train))] == [*range(6)]
    assert len(tfpipe.read_tfrecords(f"{folder}/train-*")) == 6  # a glob: counts known, too
    shard = folder / "train-00001-of-00002.tfrecord"
    records = list(tf.data.TFRecordDataset(str(shard)).as_numpy_iterator())
    with tf.io.TFRecordWriter(str(shard)) as writer:
        writer.write(records[0])  # one record of three: dataset_info.json tells
    with pytest.raises(SourceError, match=rf"{shard.name}' holds 1 records, .* lists 3"):
        tfpipe.read_tfrecords(f"{folder}/train-*")
    plain = tmp_path / "plain"  # split= also names a tfpipe prefix in a folder
    numbers = tfpipe.from_arrays({"x": np.arange(3.0)}, tfpipe.Schema({"x": tfpipe.Tensor()}))
    tfpipe.write_tfrecords(numbers, plain / "train", num_shards=1, progress=False)
    assert len(tfpipe.from_tfrecords(plain, split="train")) == 3
    with pytest.raises(ValueError, match=r"split= names a split of a dataset folder"):
        tfpipe.from_tfrecords(plain / "train", split="train")
    with pytest.raises(ValueError, match=r"tfds_compatible=True needs compression=None"):
        tfpipe.write_tfrecords(
            tfpipe.from_arrays({"x": [1.0]}, tfpipe.Schema({"x": tfpipe.Tensor()})),
            tmp_path / "other" / "train",
            compression="gzip",
            tfds_compatible=True,
        )


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.fault(
    "tfds_compatible write into a folder whose features.json describes another schema",
    reader="write_tfrecords",
    outcome="SchemaError naming features.json before any shard is written; folder untouched",
)
def test_a_write_with_other_features_is_refused_before_writing(tmp_path: Path) -> None:
    _write(tmp_path, "train", 4)
    before = _contents(tmp_path)
    other = tfpipe.Schema({"x": tfpipe.Tensor()})
    for split in ("train", "test"):  # replacing the split, or adding one
        with pytest.raises(SchemaError, match=r"features.json' describes other features"):
            tfpipe.write_tfrecords(
                tfpipe.from_arrays({"x": np.arange(3.0)}, other),
                tmp_path / split,
                num_shards=1,
                progress=False,
                tfds_compatible=True,
            )
        assert _contents(tmp_path) == before


@pytest.mark.fault(
    "write to a prefix named dataset_info or features (TFDS's own file names), tfds_compatible "
    "or into a TFDS folder",
    reader="write_tfrecords",
    outcome="ValueError naming the prefix before anything is written; also without "
    "tfds_compatible into a TFDS folder",
)
def test_a_split_named_like_a_tfds_file_is_refused_before_writing(
    tfds_folder: Path, tmp_path: Path
) -> None:
    numbers = tfpipe.from_arrays({"x": np.arange(3.0)}, tfpipe.Schema({"x": tfpipe.Tensor()}))
    for name in ("dataset_info", "features"):
        prefix = tmp_path / name / name
        message = rf"prefix '{prefix}' would write tfpipe's metadata to {name}.json, where"
        with pytest.raises(ValueError, match=message):
            tfpipe.write_tfrecords(
                numbers, prefix, num_shards=1, progress=False, tfds_compatible=True
            )
        assert not prefix.parent.exists()
        before = _contents(tfds_folder)  # a plain write into a TFDS folder: refused as well
        with pytest.raises(ValueError, match=rf"{name}.json, which describes the TFDS dataset"):
            tfpipe.write_tfrecords(numbers, tfds_folder / name, num_shards=1, progress=False)
        assert _contents(tfds_folder) == before
    tfpipe.write_tfrecords(numbers, tmp_path / "dataset_info", num_shards=1, progress=False)
    assert len(tfpipe.read_tfrecords(tmp_path)) == 3  # in another folder, the name is free


def _tfds() -> Any:
    return pytest.importorskip("tensorflow_datasets")


def _as_numpy(dataset: tf.data.Dataset) -> list[dict[str, Any]]:
    return list(dataset.as_numpy_iterator())


@pytest.mark.slow
def test_reads_what_tfds_prepared_with_the_same_values(tmp_path: Path) -> None:
    tfds = _tfds()

    class Tiny(tfds.core.GeneratorBasedBuilder, skip_registration=True):  # type: ignore[misc]
        VERSION = tfds.core.Version("1.0.0")

        def _info(self) -> Any:
            features = {
                "image": tfds.features.Image(shape=(4, 5, 3)),
                "label": tfds.features.ClassLabel(names=NAMES),
                "vec": tfds.features.Tensor(shape=(3,), dtype=np.float32),
                "var": tfds.features.Tensor(shape=(None,), dtype=np.int64),
                "zipped": tfds.features.Tensor(shape=(2, 2), dtype=np.float64, encoding="zlib"),
                "text": tfds.features.Text(),
                "meta": {"id": np.int64, "score": np.float32},
                "objects": tfds.features.Sequence(
                    {
                        "bbox": tfds.features.BBoxFeature(),
                        "kind": tfds.features.ClassLabel(names=NAMES),
                    }
                ),
            }
            return tfds.core.DatasetInfo(
                builder=self, features=tfds.features.FeaturesDict(features)
            )

        def _split_generators(self, dl_manager: Any) -> Any:
            return {"train": self._generate_examples(0, 7), "test": self._generate_examples(7, 3)}

        def _generate_examples(self, start: int, count: int) -> Any:
            for i in range(start, start + count):
                boxes = [tfds.features.BBox(0.1, 0.2, 0.3, 0.5 + i / 100)] * (i % 3)
                yield (
                    i,
                    {
                        **_example(i),
                        "var": np.arange(i % 3, dtype=np.int64),
                        "zipped": np.full((2, 2), i / 3),
                        "objects": {"bbox": boxes, "kind": [1] * (i % 3)},
                    },
                )

    builder = Tiny(data_dir=str(tmp_path))
    builder.download_and_prepare()
    folder = Path(builder.data_dir)
    for split in ("train", "test"):
        theirs = _as_numpy(builder.as_dataset(split=split, shuffle_files=False))
        ours = _as_numpy(tfpipe.read_tfrecords(folder, split=split))
        assert len(ours) == len(theirs) == builder.info.splits[split].num_examples
        for mine, their in zip(ours, theirs, strict=True):
            for key in ("image", "label", "vec", "var", "zipped", "text"):
                np.testing.assert_array_equal(mine[key], their[key])
            assert mine["meta/id"] == their["meta"]["id"]
            assert mine["meta/score"] == their["meta"]["score"]
            for key in ("bbox", "kind"):
                np.testing.assert_array_equal(mine[f"objects/{key}"], their["objects"][key])
    info = DatasetInfo.load(folder / "tiny-train")
    assert info.schema["objects/bbox"] == tfpipe.Tensor(shape=(None, 4), dtype="float32")
    assert info.class_names == {"label": builder.info.features["label"].names}
    with pytest.raises(SourceError, match=r"splits \['train', 'test'\]"):
        tfpipe.read_tfrecords(folder)


@pytest.mark.slow
def test_tfds_loads_what_tfpipe_wrote_with_the_same_values(tmp_path: Path) -> None:
    tfds = _tfds()
    folder = _tfds_files_only(tmp_path)
    builder = tfds.builder_from_directory(str(folder))
    assert builder.info.features["label"].names == NAMES
    assert {name: s.num_examples for name, s in builder.info.splits.items()} == {
        "train": 6,
        "test": 3,
    }
    for split in ("train", "test"):
        theirs = _as_numpy(builder.as_dataset(split=split, shuffle_files=False))
        ours = _as_numpy(tfpipe.read_tfrecords(folder, split=split))
        assert len(theirs) == len(ours)
        for mine, their in zip(ours, theirs, strict=True):
            for key in ("image", "label", "vec", "var", "raw", "photo", "exact", "text"):
                np.testing.assert_array_equal(mine[key], their[key])
            assert mine["meta/id"] == their["meta"]["id"]
