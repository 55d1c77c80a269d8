"""Faults that change what a label or a value means: class lists, links, duplicates, ranges,
and two writers on one prefix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pandas as pd
import pytest
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import (
    DecodeError,
    EncodeError,
    SchemaError,
    SourceError,
    TfpipeError,
    TfpipeWarning,
)
from tfpipe.format.metadata import DatasetInfo

CLASSES = ["a", "b", "c"]


def _folder(root: Path, counts: dict[str, int]) -> Path:
    """`root/<class>/<k>.png`: tiny images whose red value is the class's position in CLASSES."""
    for name, count in counts.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for k in range(count):
            colour = (CLASSES.index(name) * 100, k, 0)
            PILImage.new("RGB", (4, 4), colour).save(root / name / f"{k}.png")
    return root


def _stored(prefix: Path, schema: tfpipe.Schema | None = None) -> list[dict[str, Any]]:
    return [{k: v.numpy() for k, v in ex.items()} for ex in tfpipe.read_tfrecords(prefix, schema)]


def _schema(names: list[str], shape: tuple[Any, ...] = (None, None, 3)) -> tfpipe.Schema:
    return tfpipe.Schema(
        {"image": tfpipe.Image(shape=shape, encoding="png"), "label": tfpipe.ClassLabel(names)}
    )


# ---------------------------------------------------------------- class lists on write and read


@pytest.mark.fault(
    "schema= lists the source's classes in another order, plus one",
    reader="write_tfrecords",
    outcome="labels matched by name: every image keeps its class",
)
def test_write_matches_labels_by_name(tmp_path: Path) -> None:
    src = tfpipe.from_directory(_folder(tmp_path / "img", {"a": 2, "b": 3, "c": 1}))
    target = ["c", "x", "a", "b"]
    tfpipe.write_tfrecords(src, tmp_path / "t", schema=_schema(target), progress=False)
    stored = _stored(tmp_path / "t")
    assert len(stored) == 6
    for example in stored:  # the red value says which class folder the image came from
        assert target[example["label"]] == CLASSES[example["image"][0, 0, 0] // 100]


@pytest.mark.fault(
    "schema= lacks a class of the source",
    reader="write_tfrecords",
    outcome="SchemaError with both class lists; nothing written",
)
def test_write_refuses_a_schema_without_a_source_class(tmp_path: Path) -> None:
    src = tfpipe.from_directory(_folder(tmp_path / "img", {"a": 1, "b": 1, "c": 1}))
    with pytest.raises(SchemaError, match=r"lacks the class\(es\) \['a'\]") as caught:
        tfpipe.write_tfrecords(src, tmp_path / "out" / "t", schema=_schema(["c", "b"]))
    assert "['a', 'b', 'c']" in str(caught.value) and "['c', 'b']" in str(caught.value)
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.fault(
    "schema= ClassLabel without names differs (num_classes, multi_label)",
    reader="write_tfrecords",
    outcome="SchemaError naming the feature and both",
)
@pytest.mark.parametrize(
    "label",
    [tfpipe.ClassLabel(num_classes=5), tfpipe.ClassLabel(num_classes=3, multi_label=True)],
)
def test_write_refuses_unnamed_labels_that_differ(tmp_path: Path, label: Any) -> None:
    src = tfpipe.from_arrays({"x": np.arange(3.0), "label": np.arange(3)})
    with pytest.raises(SchemaError, match=r"label: .*num_classes=3.*num_classes="):
        tfpipe.write_tfrecords(
            src, tmp_path / "t", schema=tfpipe.Schema({**src.schema, "label": label})
        )


def test_write_names_unnamed_labels_of_the_same_count(tmp_path: Path) -> None:
    src = tfpipe.from_arrays({"x": np.arange(3.0), "label": np.array([2, 0, 1])})
    schema = tfpipe.Schema({**src.schema, "label": tfpipe.ClassLabel(CLASSES)})
    tfpipe.write_tfrecords(src, tmp_path / "t", schema=schema, shuffle=False, progress=False)
    assert [int(e["label"]) for e in _stored(tmp_path / "t")] == [2, 0, 1]


def test_write_maps_multi_labels_by_name(tmp_path: Path) -> None:
    df = pd.DataFrame({"path": ["a/0.png", "b/0.png"], "tags": ["['a', 'c']", "['b']"]})
    _folder(tmp_path, {"a": 1, "b": 1})
    src = tfpipe.from_dataframe(df, label_cols=["tags"], base_dir=tmp_path)
    schema = tfpipe.Schema(
        {"image": src.schema["image"], "tags": tfpipe.ClassLabel(["c", "b", "a"], multi_label=True)}
    )
    tfpipe.write_tfrecords(src, tmp_path / "t", schema=schema, shuffle=False, progress=False)
    hot = [e["tags"].tolist() for e in _stored(tmp_path / "t")]
    assert hot == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]


@pytest.mark.fault(
    "schema= reorders the class names the records were written with",
    reader="read_tfrecords, Pipeline, from_tfrecords",
    outcome="SchemaError with both class lists",
)
@pytest.mark.parametrize("reader", ["read_tfrecords", "Pipeline", "from_tfrecords"])
def test_readers_refuse_a_schema_that_relabels_stored_indices(tmp_path: Path, reader: str) -> None:
    src = tfpipe.from_directory(_folder(tmp_path / "img", {"a": 1, "b": 1, "c": 1}))
    tfpipe.write_tfrecords(src, tmp_path / "t", schema=_schema(CLASSES), progress=False)
    read = getattr(tfpipe, reader)
    read(tmp_path / "t", schema=_schema(CLASSES))  # the same class list is fine
    read(tmp_path / "t", schema=_schema([*CLASSES, "d"]))  # so is one more class at the end
    with pytest.raises(SchemaError, match=r"would change the labels") as caught:
        read(tmp_path / "t", schema=_schema(["b", "a", "c"]))
    assert "['b', 'a', 'c']" in str(caught.value) and "['a', 'b', 'c']" in str(caught.value)


def test_cli_write_splits_share_one_class_list(tmp_path: Path) -> None:
    from tfpipe.cli.parser import main

    _folder(tmp_path / "img", {"a": 6, "b": 6, "c": 1})  # "c" fits in one split only
    args = ["write", str(tmp_path / "img"), str(tmp_path / "out"), "--encoding", "png"]
    assert main([*args, "--split", "train=0.5,test=0.5"]) == 0
    train = DatasetInfo.load(tmp_path / "out" / "train")
    test = DatasetInfo.load(tmp_path / "out" / "test")
    assert train.class_names == test.class_names == {"label": CLASSES}
    assert train.num_examples + test.num_examples == 13


def test_splits_share_the_parent_class_list(tmp_path: Path) -> None:
    src = tfpipe.from_directory(_folder(tmp_path / "img", {"a": 4, "b": 4, "c": 1}))
    with pytest.warns(TfpipeWarning, match="class 2 has 1 example"):
        parts = src.split({"train": 0.5, "test": 0.5})
    assert {len(np.unique(p.labels())) for p in parts.values()} == {2, 3}  # one lacks "c"
    for name, part in parts.items():
        tfpipe.write_tfrecords(part, tmp_path / name, progress=False)
        assert DatasetInfo.load(tmp_path / name).class_names == {"label": CLASSES}


# ---------------------------------------------------------------- class names per folder


@pytest.mark.fault(
    "test folder lacks one class folder",
    reader="from_directory(class_names=)",
    outcome="indices follow class_names; a warning names the missing class",
)
def test_class_names_keep_indices_when_a_folder_is_missing(tmp_path: Path) -> None:
    _folder(tmp_path, {"a": 1, "c": 2})
    assert tfpipe.from_directory(tmp_path).class_names == ["a", "c"]  # "c" would be index 1
    with pytest.warns(TfpipeWarning, match=r"1 of the 3 classes have no folder.*\['b'\]"):
        src = tfpipe.from_directory(tmp_path, class_names=CLASSES)
    assert src.class_names == CLASSES
    assert src.schema["label"] == tfpipe.ClassLabel(CLASSES)
    assert src.labels().tolist() == [0, 2, 2]


@pytest.mark.fault(
    "records written inside the image folder (`tfpipe write img img/_records/train`), then "
    "the folder read again",
    reader="from_directory, tfpipe write",
    outcome="SourceError naming the records' folder (was a phantom class '_records' that moved "
    "a, b from 0, 1 to 1, 2); `tfpipe write` refuses such an OUT up front",
)
def test_a_folder_of_records_inside_the_image_folder_is_no_class(tmp_path: Path) -> None:
    images = _folder(tmp_path / "img", {"a": 2, "b": 2})
    records = images / "_records" / "train"
    tfpipe.write_tfrecords(tfpipe.from_directory(images), records, progress=False)
    with pytest.raises(
        SourceError,
        match=r"folder\(s\) \['_records'\] in .*img' hold TFRecord files \(first: "
        r".*train-00000-of-\d+\.tfrecord'\) and no images.*Move them out of",
    ):
        tfpipe.from_directory(images)


@pytest.mark.fault(
    "from_directory one level too high: data/train/<class>, data/test/<class>",
    reader="from_directory",
    outcome="SourceError naming the split folders and from_directory('data/train') (was the "
    "classes ['test', 'train'], no warning)",
)
def test_a_root_above_the_split_folders_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for split in ("train", "test"):
        _folder(data / split, {"a": 2, "b": 1})
    expected = (
        r"folder\(s\) \['test', 'train'\] in .*data' hold no images of their own, only "
        r"sub-folders of images \(\['a', 'b'\]\).*from_directory\('.*data/train'\)"
    )
    with pytest.raises(SourceError, match=expected):
        tfpipe.from_directory(data)
    assert tfpipe.from_directory(data / "train").class_names == ["a", "b"]
    # Given as the classes, they are; one split alone (with two classes) is refused too.
    assert len(tfpipe.from_directory(data, class_names=["test", "train"])) == 6
    _folder(tmp_path / "one" / "train", {"a": 1, "b": 1})
    with pytest.raises(SourceError, match=r"\['train'\] in .* \(\['a', 'b'\]\)"):
        tfpipe.from_directory(tmp_path / "one")


def test_class_folders_with_image_sub_folders_of_their_own_are_classes(tmp_path: Path) -> None:
    """Sub-folders that no two classes share are a class's own (batches, sessions)."""
    _folder(tmp_path / "a" / "day1", {"a": 1})
    _folder(tmp_path / "b" / "day2", {"b": 2})
    assert tfpipe.from_directory(tmp_path).class_names == ["a", "b"]


@pytest.mark.fault(
    "an empty class folder (or one with no file of the wanted extensions)",
    reader="from_directory",
    outcome="TfpipeWarning naming the folder and its unused class index (was silent)",
)
def test_an_empty_class_folder_is_warned_about(tmp_path: Path) -> None:
    _folder(tmp_path, {"a": 1, "c": 1})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("no image here")
    with pytest.warns(TfpipeWarning, match=r"class folder\(s\) \['b'\] hold no files with .*\[1\]"):
        src = tfpipe.from_directory(tmp_path)
    assert src.class_names == CLASSES and src.labels().tolist() == [0, 2]


@pytest.mark.fault(
    "a folder holding a single class folder (mostly the folder one level too low)",
    reader="from_directory, Pipeline, SequenceLoader, write_tfrecords",
    outcome="TfpipeWarning naming the class and the folder, and class_names= to read one class "
    "on purpose (was silent: every example class 0)",
)
def test_a_single_class_folder_is_warned_about(tmp_path: Path) -> None:
    root = _folder(tmp_path / "data", {"a": 2})
    message = r"from_directory\('.*data'\): the folder holds a single class folder, 'a'.*" + (
        r"class_names=\['a'\]"
    )
    reads = [
        lambda: tfpipe.from_directory(root),
        lambda: tfpipe.Pipeline(root, image_size=(4, 4)),
        lambda: tfpipe.SequenceLoader(root, batch_size=2, image_size=(4, 4)),
        lambda: tfpipe.write_tfrecords(root, tmp_path / "out", progress=False),
    ]
    for read in reads:
        with pytest.warns(TfpipeWarning, match=message):
            read()
    one = tfpipe.from_directory(root, class_names=["a"])  # on purpose: no warning
    assert one.class_names == ["a"] and one.labels().tolist() == [0, 0]


def test_class_names_set_the_order(tmp_path: Path) -> None:
    _folder(tmp_path, {"a": 1, "b": 1, "c": 1})
    src = tfpipe.from_directory(tmp_path, class_names=["c", "a", "b"])
    assert [src.origin(i).split(os.sep)[-2] for i in range(3)] == ["c", "a", "b"]
    assert src.labels().tolist() == [0, 1, 2]


def test_class_names_refuse_an_unlisted_folder_and_bad_lists(tmp_path: Path) -> None:
    _folder(tmp_path, {"a": 1, "b": 1, "c": 1})
    with pytest.raises(SourceError, match=r"class folder\(s\) \['c'\].*not in class_names"):
        tfpipe.from_directory(tmp_path, class_names=["a", "b"])
    for bad in ("abc", ["a", "a", "b", "c"], []):
        with pytest.raises(ValueError, match="class_names"):
            tfpipe.from_directory(tmp_path, class_names=bad)


def _model() -> keras.Model:
    model = keras.Sequential(
        [keras.Input((4, 4, 3)), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.fault(
    "train and validation have different class names",
    reader="tfpipe.fit (paths, Pipeline, SequenceLoader)",
    outcome="SchemaError naming the feature and both lists",
)
@pytest.mark.parametrize("kind", ["path", "Pipeline", "SequenceLoader"])
def test_fit_refuses_validation_with_other_class_names(tmp_path: Path, kind: str) -> None:
    train = tfpipe.from_directory(_folder(tmp_path / "train", {"a": 2, "b": 2, "c": 2}))
    test = tfpipe.from_directory(_folder(tmp_path / "test", {"a": 2, "c": 2}))
    for name, src in [("train", train), ("test", test)]:
        schema = tfpipe.Schema({**_schema(["?"], (4, 4, 3)), "label": src.schema["label"]})
        tfpipe.write_tfrecords(src, tmp_path / "rec" / name, schema=schema, progress=False)
    inputs = {
        "path": lambda name: str(tmp_path / "rec" / name),
        "Pipeline": lambda name: (
            tfpipe.Pipeline(tmp_path / "rec" / name).batch(2).as_supervised("image", "label")
        ),
        "SequenceLoader": lambda name: tfpipe.SequenceLoader(
            tfpipe.from_tfrecords(tmp_path / "rec" / name), batch_size=2
        ),
    }[kind]
    with pytest.raises(SchemaError, match=r"label: data and validation") as caught:
        tfpipe.fit(_model(), inputs("train"), validation=inputs("test"), report=False, verbose=0)
    assert "['a', 'b', 'c']" in str(caught.value) and "['a', 'c']" in str(caught.value)


def test_fit_accepts_validation_built_with_the_train_class_names(tmp_path: Path) -> None:
    train = tfpipe.from_directory(_folder(tmp_path / "train", {"a": 2, "b": 2, "c": 2}))
    with pytest.warns(TfpipeWarning, match="no folder"):
        test = tfpipe.from_directory(
            _folder(tmp_path / "test", {"a": 2, "c": 2}), class_names=train.class_names
        )
    loaders = [tfpipe.SequenceLoader(s, batch_size=2, image_size=(4, 4)) for s in (train, test)]
    history = tfpipe.fit(_model(), loaders[0], validation=loaders[1], report=False, verbose=0)
    assert "val_loss" in history.history


# ---------------------------------------------------------------- links and duplicates


@pytest.mark.fault(
    "folder symlink loop (link to a parent folder)",
    reader="from_directory(follow_links=True)",
    outcome="loop skipped and counted in a warning; each image once",
)
def test_link_loops_are_skipped_and_counted(tmp_path: Path) -> None:
    root = _folder(tmp_path / "root", {"a": 2, "b": 1})
    (root / "a" / "sub").mkdir()
    PILImage.new("RGB", (4, 4)).save(root / "a" / "sub" / "deep.png")
    (root / "a" / "sub" / "up").symlink_to(root / "a", target_is_directory=True)
    (root / "b" / "root").symlink_to(root, target_is_directory=True)
    with pytest.warns(TfpipeWarning, match=r"skipped 2 link\(s\) that loop back"):
        src = tfpipe.from_directory(root, follow_links=True)
    assert len(src) == 4 and len(set(src.paths)) == 4
    assert src.labels().tolist() == [0, 0, 0, 1]


@pytest.mark.fault(
    "a folder linked under two classes",
    reader="from_directory(follow_links=True)",
    outcome="SourceError naming both paths",
)
def test_a_folder_reached_twice_raises(tmp_path: Path) -> None:
    root = _folder(tmp_path / "root", {"a": 1, "b": 1})
    (root / "b" / "also_a").symlink_to(root / "a", target_is_directory=True)
    assert len(tfpipe.from_directory(root)) == 2  # not followed: read once
    with pytest.raises(SourceError, match=r"also_a' is the folder .*/a' again"):
        tfpipe.from_directory(root, follow_links=True)


@pytest.mark.fault(
    "one image file linked under two classes",
    reader="from_directory",
    outcome="SourceError naming both paths",
)
def test_a_file_reached_twice_raises(tmp_path: Path) -> None:
    root = _folder(tmp_path / "root", {"a": 1, "b": 1})
    (root / "b" / "copy.png").symlink_to(root / "a" / "0.png")
    with pytest.raises(SourceError, match=r"copy.png' is the file .*a/0.png' again"):
        tfpipe.from_directory(root)


@pytest.mark.fault(
    "image files hard-linked under two classes",
    reader="from_directory",
    outcome="SourceError naming the first file listed again and the file it is",
)
def test_a_hard_linked_file_raises_naming_the_first_repeat(tmp_path: Path) -> None:
    root = _folder(tmp_path / "root", {"a": 2, "b": 1, "c": 1})
    os.link(root / "a" / "1.png", root / "b" / "1.png")  # the first repeat in walk order
    os.link(root / "a" / "0.png", root / "c" / "1.png")
    os.link(root / "a" / "1.png", root / "c" / "2.png")
    with pytest.raises(SourceError, match=r"'[^']*b/1.png' is the file '[^']*a/1.png' again"):
        tfpipe.from_directory(root)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders without permission")
def test_an_unreadable_folder_raises_instead_of_being_left_out(tmp_path: Path) -> None:
    root = _folder(tmp_path / "root", {"a": 1, "b": 1})
    (root / "a" / "locked").mkdir()
    (root / "a" / "locked").chmod(0)
    try:
        with pytest.raises(SourceError, match=r"cannot list the folder .*locked"):
            tfpipe.from_directory(root)
    finally:
        (root / "a" / "locked").chmod(0o755)


def _repeated_rows(root: Path) -> pd.DataFrame:
    """24 images of 2 classes, each in 3 rows (paths written two ways)."""
    _folder(root, {"a": 12, "b": 12})
    paths = [f"{c}/{k}.png" for c in "ab" for k in range(12)]
    rows = [(p, p[0]) for p in paths] * 2 + [(f"./{p}", p[0]) for p in paths]
    return pd.DataFrame(rows, columns=["path", "label"])


@pytest.mark.fault(
    "duplicate DataFrame rows (one image in several rows)",
    reader="from_dataframe + split",
    outcome="warning counts them; each image in one split",
)
def test_split_keeps_the_rows_of_one_image_together(tmp_path: Path) -> None:
    df = _repeated_rows(tmp_path)
    with pytest.warns(TfpipeWarning, match=r"path: 48 row\(s\) repeat the image"):
        src = tfpipe.from_dataframe(df, base_dir=tmp_path)
    for seed in range(5):
        parts = src.split({"train": 0.5, "test": 0.25, "val": 0.25}, seed=seed)
        images = [{os.path.normpath(p) for p in src.paths[part.indices]} for part in parts.values()]
        assert sum(map(len, images)) == 24 and len(set.union(*images)) == 24
        assert sorted(len(p) for p in parts.values()) == [18, 18, 36]  # 12 / 6 / 6 images
        assert all(np.bincount(p.labels()).tolist() == [len(p) // 2] * 2 for p in parts.values())


@pytest.mark.fault(
    "one image in two DataFrame rows with different labels",
    reader="from_dataframe",
    outcome="SourceError naming both rows",
)
def test_rows_of_one_image_with_different_labels_raise(tmp_path: Path) -> None:
    _folder(tmp_path, {"a": 2})
    df = pd.DataFrame({"path": ["a/0.png", "a/1.png", "a/0.png"], "label": ["a", "a", "b"]})
    message = r"label: rows 0 and 2 name the same image .* \('a' and 'b'\)"
    with pytest.raises(SourceError, match=message):
        tfpipe.from_dataframe(df, base_dir=tmp_path)


# ---------------------------------------------------------------- values out of range


OUT_OF_RANGE = [  # the second value of each is out of range
    ("float32", np.array([1.0, 1e39]), r"value 1e\+39 is outside the range of float32"),
    ("float16", np.array([1.0, 7e4]), r"value 70000.0 .* float16"),
    ("uint8", np.array([1, 300]), r"value 300 .* uint8 \(\[0, 255\]\)"),
    ("int64", np.array([1, 2**63 + 5], np.uint64), r"value 9223372036854775813 .* int64"),
    ("int32", np.array([1, 3e12]), r"value 3000000000000.0 .* int32"),
    ("bool", np.array([0, 2]), r"value 2 .* bool \(0 or 1\)"),
]


@pytest.mark.fault(
    "values beyond the Tensor dtype's range (1e39 as float32, 300 as uint8)",
    reader="write_tfrecords",
    outcome="EncodeError naming the feature, value and example",
)
@pytest.mark.parametrize(("dtype", "values", "message"), OUT_OF_RANGE)
def test_values_out_of_range_are_not_written(
    tmp_path: Path, dtype: str, values: np.ndarray, message: str
) -> None:
    src = tfpipe.from_arrays({"v": values}, schema=tfpipe.Schema({"v": tfpipe.Tensor((), dtype)}))
    with pytest.raises(EncodeError, match=rf"v: {message}.* in example 1$"):
        tfpipe.write_tfrecords(src, tmp_path / "t", shuffle=False, progress=False)


@pytest.mark.fault(
    "values beyond the Tensor dtype's range",
    reader="SequenceLoader, Pipeline",
    outcome="DecodeError / SourceError naming the feature and value",
)
def test_loaders_refuse_values_out_of_range() -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor((), "uint8"), "label": tfpipe.ClassLabel(["a"])})
    src = tfpipe.from_arrays({"x": np.array([7, 300]), "label": np.zeros(2, int)}, schema=schema)
    loader = tfpipe.SequenceLoader(src, batch_size=2, x="x", shuffle=False)
    with pytest.raises(DecodeError, match=r"x: value 300 is outside .* uint8"):
        loader[0]
    with pytest.raises(SourceError, match=r"x: value 300 at index \(1,\)"):
        tfpipe.Pipeline(src).batch(2).build()
    src = tfpipe.from_arrays({"x": np.array([7, 0.5]), "label": np.zeros(2, int)}, schema=schema)
    with pytest.raises(SourceError, match=r"x: expected uint8, got non-integral"):
        tfpipe.Pipeline(src).batch(2).build()


def test_array_labels_given_as_names_split_by_class() -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor(()), "label": tfpipe.ClassLabel(["b", "a"])})
    src = tfpipe.from_arrays({"x": np.arange(4.0), "label": np.array(list("abab"))}, schema=schema)
    assert src.labels().tolist() == [1, 0, 1, 0]
    with pytest.warns(TfpipeWarning, match="class 0 has 2 example"):
        parts = src.split({"p": 1 / 3, "q": 1 / 3, "r": 1 / 3})
    assert sorted(len(p) for p in parts.values()) == [0, 2, 2]


def test_float64_beyond_float32_in_a_float64_tensor_is_not_stored_as_inf() -> None:
    feature = tfpipe.Tensor((2,), "float64")
    assert feature.load([1.0, 1e300]).tolist() == [1.0, 1e300]  # float64 in memory is fine
    with pytest.raises(ValueError, match=r"1e\+300 at index \(1,\).*float32"):
        feature.encode([1.0, 1e300])  # but it is stored as float32


def test_nan_inf_and_in_range_values_are_data(tmp_path: Path) -> None:
    values = np.array([[np.nan], [np.inf], [-3.4e38], [0.5]])
    schema = tfpipe.Schema({"v": tfpipe.Tensor((1,), "float32"), "u": tfpipe.Tensor((), "uint8")})
    src = tfpipe.from_arrays({"v": values, "u": np.array([0, 255, 7, 1])}, schema=schema)
    tfpipe.write_tfrecords(src, tmp_path / "t", shuffle=False, progress=False)
    stored = _stored(tmp_path / "t")
    got = np.array([e["v"][0] for e in stored])
    np.testing.assert_array_equal(got, values[:, 0].astype(np.float32))
    assert [int(e["u"]) for e in stored] == [0, 255, 7, 1]


# ---------------------------------------------------------------- two writers on one prefix


_HOLD_LOCK = """
import sys, time
import numpy as np
import tfpipe

class Slow:
    schema = tfpipe.Schema({"x": tfpipe.Tensor((), "int64")})
    def __len__(self):
        return 40
    def __getitem__(self, i):
        time.sleep(float(sys.argv[2]))
        return {"x": i}

tfpipe.write_tfrecords(Slow(), sys.argv[1], num_shards=4, shuffle=False, workers=1,
                       progress=False)
"""


def _start_writer(tmp_path: Path, seconds: float) -> tuple[subprocess.Popen[bytes], Path]:
    """A writer process on `tmp_path/train` (`seconds` per example), once it holds the lock
    (the lock file names its pid)."""
    script = tmp_path / "hold_lock.py"
    script.write_text(textwrap.dedent(_HOLD_LOCK))
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "train"), str(seconds)])
    lock = tmp_path / ".train.lock"
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text().strip() == str(process.pid)):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("the writer process never took the lock")
        time.sleep(0.02)
    return process, lock


@pytest.mark.slow
@pytest.mark.fault(
    "two processes write one prefix at once",
    reader="write_tfrecords",
    outcome="the second raises naming the prefix and the first's pid; the first finishes whole",
)
def test_a_second_writer_process_fails_and_the_first_finishes(tmp_path: Path) -> None:
    process, lock = _start_writer(tmp_path, 0.02)
    try:
        src = tfpipe.from_arrays({"x": np.arange(8)})
        with pytest.raises(TfpipeError, match=rf"train'.*pid {process.pid}"):
            tfpipe.write_tfrecords(src, tmp_path / "train", progress=False)
        assert process.wait(timeout=120) == 0
    finally:
        process.kill()
    assert not lock.exists()
    assert sorted(int(e["x"]) for e in _stored(tmp_path / "train")) == list(range(40))


@pytest.mark.slow
@pytest.mark.fault(
    "the writer holding the lock is killed (SIGKILL)",
    reader="write_tfrecords",
    outcome="no stale lock: the next write proceeds and removes the lock file",
)
def test_a_killed_writer_leaves_no_stale_lock(tmp_path: Path) -> None:
    process, lock = _start_writer(tmp_path, 10)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert lock.exists()  # the file stays, but the kernel released the lock
    src = tfpipe.from_arrays({"x": np.arange(8)})
    tfpipe.write_tfrecords(src, tmp_path / "train", num_shards=2, progress=False)
    assert not lock.exists()
    assert sorted(int(e["x"]) for e in _stored(tmp_path)) == list(range(8))


class _Gated:
    """A source whose reads wait for `gate`, so a write holds its lock as long as a test wants."""

    schema = tfpipe.Schema({"x": tfpipe.Tensor((), "int64")})

    def __init__(self) -> None:
        self.gate = threading.Event()

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not self.gate.wait(timeout=60):
            raise TimeoutError("gate never opened")
        return {"x": index}


@pytest.mark.fault(
    "two threads write one prefix at once",
    reader="write_tfrecords",
    outcome="the second raises naming the prefix; the first finishes whole",
)
def test_a_second_writer_thread_fails_and_the_first_finishes(tmp_path: Path) -> None:
    gated, errors = _Gated(), []

    def write() -> None:
        try:
            tfpipe.write_tfrecords(gated, tmp_path / "train", num_shards=2, progress=False)
        except Exception as e:  # reported by the assertion below
            errors.append(e)

    first = threading.Thread(target=write)
    first.start()
    lock = tmp_path / ".train.lock"
    deadline = time.monotonic() + 30
    while not (lock.exists() and lock.read_text().strip()):
        assert time.monotonic() < deadline, "the first writer never took the lock"
        time.sleep(0.01)
    other = tfpipe.from_arrays({"x": np.arange(4)})
    with pytest.raises(TfpipeError, match=r"this process: another thread"):
        tfpipe.write_tfrecords(other, tmp_path / "train", progress=False)
    tfpipe.write_tfrecords(other, tmp_path / "other", progress=False)  # another prefix is free
    gated.gate.set()
    first.join(timeout=60)
    assert not first.is_alive() and errors == []
    assert sorted(int(e["x"]) for e in _stored(tmp_path / "train")) == list(range(8))
    assert sorted(int(e["x"]) for e in _stored(tmp_path / "other")) == list(range(4))
    assert not lock.exists()
