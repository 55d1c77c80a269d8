"""Sources: image folders, DataFrames, arrays, and splits of them."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import DataNotFoundError, SchemaError, SourceError, TfpipeWarning
from tfpipe.sources import SourceBase


def _write_images(root: Path, names: list[str]) -> None:
    """Writes tiny real images at `root/<name>` (folders created), format from the suffix."""
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        fmt = "PNG" if name.lower().endswith(".png") else "JPEG"
        PILImage.new("RGB", (4, 4), (200, 10, 10)).save(path, format=fmt)


# ---------------------------------------------------------------- from_directory


def test_directory_classes_are_sorted_folder_names_and_labels_follow(tmp_path: Path) -> None:
    _write_images(tmp_path, ["zebra/1.jpg", "ant/1.jpg", "ant/2.jpg", "mole/1.jpg"])
    src = tfpipe.from_directory(tmp_path)
    assert src.class_names == ["ant", "mole", "zebra"]
    assert src.schema["label"] == tfpipe.ClassLabel(names=["ant", "mole", "zebra"])
    examples = [src[i] for i in range(len(src))]
    by_path = {Path(e["image"]).relative_to(tmp_path).as_posix(): e["label"] for e in examples}
    assert by_path == {"ant/1.jpg": 0, "ant/2.jpg": 0, "mole/1.jpg": 1, "zebra/1.jpg": 2}
    assert all(os.path.isfile(e["image"]) for e in examples)
    np.testing.assert_array_equal(src.labels(), [e["label"] for e in examples])
    assert src.origin(-1) == examples[-1]["image"]


def test_directory_reads_nested_folders_and_skips_hidden_files(tmp_path: Path) -> None:
    names = ["cat/a/b/deep.jpg", "cat/top.jpg", "cat/.hidden.jpg", ".git/x.jpg", "dog/1.jpg"]
    _write_images(tmp_path, names)
    src = tfpipe.from_directory(tmp_path)
    assert src.class_names == ["cat", "dog"]
    # As os.walk lists them: a folder's own files before those of its sub-folders.
    images = [Path(src[i]["image"]).relative_to(tmp_path).as_posix() for i in range(len(src))]
    assert images == ["cat/top.jpg", "cat/a/b/deep.jpg", "dog/1.jpg"]


def test_directory_extensions_are_case_insensitive_and_filter(tmp_path: Path) -> None:
    _write_images(tmp_path, ["a/1.JPG", "a/2.png", "b/3.jpeg", "b/notes.txt"])
    (tmp_path / "b" / "notes.txt").write_text("not an image")
    assert len(tfpipe.from_directory(tmp_path)) == 3
    with pytest.warns(TfpipeWarning, match=r"\['b'\] hold no files with extensions"):
        only_png = tfpipe.from_directory(tmp_path, extensions=["png"])
    assert [Path(only_png[i]["image"]).name for i in range(len(only_png))] == ["2.png"]
    with pytest.raises(ValueError, match="extensions must be a non-empty list"):
        tfpipe.from_directory(tmp_path, extensions=".jpg")


def test_directory_follow_links(tmp_path: Path) -> None:
    _write_images(tmp_path, ["outside/1.jpg", "outside/2.jpg", "root/real/1.jpg"])
    (tmp_path / "root" / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.warns(TfpipeWarning, match="a single class folder, 'real'"):
        assert tfpipe.from_directory(tmp_path / "root").class_names == ["real"]
    followed = tfpipe.from_directory(tmp_path / "root", follow_links=True)
    assert followed.class_names == ["linked", "real"]
    assert len(followed) == 3


def test_directory_listing_shows_progress_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_images(tmp_path, ["a/1.jpg", "a/2.jpg", "b/3.jpg"])
    monkeypatch.setattr(tfpipe.sources.directory, "PROGRESS_AFTER", 0.0)  # not after 2 s
    tfpipe.from_directory(tmp_path, progress=False)
    assert capsys.readouterr().err == ""
    tfpipe.from_directory(tmp_path)
    shown = capsys.readouterr().err
    assert "listing" in shown and "2/2" in shown and "class folders" in shown, shown
    assert "3 files" in shown, shown


def test_directory_missing_root(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"does-not-exist.*does not exist"):
        tfpipe.from_directory(tmp_path / "does-not-exist")
    with pytest.raises(FileNotFoundError):
        tfpipe.from_directory(tmp_path / "does-not-exist")


def test_directory_without_class_folders(tmp_path: Path) -> None:
    _write_images(tmp_path, ["1.jpg", "2.jpg"])
    with pytest.raises(SourceError, match=r"no class sub-folders.*root/<class name>"):
        tfpipe.from_directory(tmp_path)


def test_directory_with_only_empty_class_folders(tmp_path: Path) -> None:
    (tmp_path / "cat").mkdir()
    (tmp_path / "dog").mkdir()
    with pytest.raises(SourceError, match="found no files with extensions"):
        tfpipe.from_directory(tmp_path)


def test_directory_image_shape_sets_the_schema(image_folder: Path) -> None:
    src = tfpipe.from_directory(image_folder, image_shape=(16, 16, 1))
    assert src.schema["image"] == tfpipe.Image(shape=(16, 16, 1), encoding="auto")
    assert src.schema.decode(src.schema.encode(src[0]))["image"].shape == (16, 16, 1)


def _mixed_folder(root: Path) -> dict[str, bytes]:
    """Random-pixel PNG, JPEG, BMP and GIF files under two classes; name -> file bytes."""
    rng = np.random.default_rng(0)
    names = {"a/0.png": "PNG", "a/1.jpg": "JPEG", "b/2.png": "PNG", "b/3.bmp": "BMP"}
    names["b/4.gif"] = "GIF"
    for name, fmt in names.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (12, 10, 3), np.uint8)
        image = PILImage.fromarray(pixels)
        (image.quantize(16) if fmt == "GIF" else image).save(root / name, fmt, quality=80)
    return {name: (root / name).read_bytes() for name in names}


def _write_default(entry: str, folder: Path, prefix: Path) -> None:
    if entry == "from_directory":
        source: SourceBase = tfpipe.from_directory(folder)
    else:
        paths = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.*"))
        df = pd.DataFrame({"path": paths, "label": [p.split("/")[0] for p in paths]})
        source = tfpipe.from_dataframe(df, base_dir=folder)
    assert source.schema["image"].encoding == "auto"
    tfpipe.write_tfrecords(source, prefix, num_shards=1, shuffle=False, progress=False)


@pytest.mark.parametrize("entry", ["from_directory", "from_dataframe"])
def test_default_write_stores_images_as_they_came(tmp_path: Path, entry: str) -> None:
    files = _mixed_folder(tmp_path / "img")
    _write_default(entry, tmp_path / "img", tmp_path / "out" / "train")
    stored = [e["image"] for e in tfpipe.from_tfrecords(tmp_path / "out" / "train")]
    # JPEG and PNG files byte for byte; BMP and GIF as PNG, pixel for pixel
    assert stored[:3] == [files["a/0.png"], files["a/1.jpg"], files["b/2.png"]]
    for data, name in zip(stored[3:], ["b/3.bmp", "b/4.gif"], strict=True):
        assert data.startswith(b"\x89PNG")
        original = np.asarray(PILImage.open(tmp_path / "img" / name).convert("RGB"))
        np.testing.assert_array_equal(np.asarray(PILImage.open(io.BytesIO(data))), original)


# ---------------------------------------------------------------- from_dataframe


def test_dataframe_with_class_names(image_folder: Path, image_dataframe: pd.DataFrame) -> None:
    src = tfpipe.from_dataframe(image_dataframe, base_dir=image_folder)
    assert len(src) == len(image_dataframe) == 36
    assert src.schema["label"] == tfpipe.ClassLabel(names=["circle", "square", "triangle"])
    row = image_dataframe.iloc[13]
    assert src[13] == {
        "image": str(image_folder / row["path"]),
        "label": ["circle", "square", "triangle"].index(row["label"]),
    }
    assert src.origin(13) == f"row 13 ({image_folder / row['path']})"


def test_dataframe_with_int_labels_and_absolute_paths(
    image_folder: Path, image_dataframe: pd.DataFrame
) -> None:
    df = pd.DataFrame(
        {
            "file": [str(image_folder / p) for p in image_dataframe["path"][:4]],
            "y": [0, 4, 2, 0],
        }
    )
    src = tfpipe.from_dataframe(df, path_col="file", label_cols="y", base_dir="/elsewhere")
    assert src.schema["y"] == tfpipe.ClassLabel(num_classes=5)
    assert src[1] == {"image": df["file"][1], "y": 4}
    np.testing.assert_array_equal(src.labels(), [0, 4, 2, 0])


def test_dataframe_list_string_labels_and_several_label_columns(
    image_folder: Path, image_dataframe: pd.DataFrame
) -> None:
    df = pd.DataFrame(
        {
            "path": image_dataframe["path"][:3],
            "weather": ["clear", "haze", "clear"],
            "ground": ["[1, 0, 3]", "[2]", "[]"],
        }
    )
    src = tfpipe.from_dataframe(df, label_cols=["weather", "ground"], base_dir=image_folder)
    assert list(src.schema) == ["image", "weather", "ground"]
    assert src.schema["weather"] == tfpipe.ClassLabel(names=["clear", "haze"])
    assert src.schema["ground"] == tfpipe.ClassLabel(num_classes=4, multi_label=True)
    assert src[0]["ground"] == [1, 0, 3] and src[2]["ground"] == []
    decoded = src.schema.decode(src.schema.encode(src[0]))
    np.testing.assert_array_equal(decoded["ground"], [1.0, 1.0, 0.0, 1.0])
    assert int(decoded["weather"]) == 0
    np.testing.assert_array_equal(src.labels(), [0, 1, 0])


def test_dataframe_list_cells_are_never_evaluated(
    image_folder: Path, image_dataframe: pd.DataFrame, tmp_path: Path
) -> None:
    marker = tmp_path / "evaluated"
    df = pd.DataFrame(
        {
            "path": image_dataframe["path"][:2],
            "tags": ["[0, 1]", f"[__import__('pathlib').Path({str(marker)!r}).touch()]"],
        }
    )
    with pytest.raises(SourceError, match=r"tags: cannot parse .* as a list in row 1"):
        tfpipe.from_dataframe(df, label_cols=["tags"], base_dir=image_folder)
    assert not marker.exists()


def test_dataframe_missing_column(image_dataframe: pd.DataFrame) -> None:
    with pytest.raises(SourceError, match="label_cols: column 'class' is not in"):
        tfpipe.from_dataframe(image_dataframe, label_cols=["class"])
    with pytest.raises(SourceError, match=r"path_col: column 'file'.*\['path', 'label'\]"):
        tfpipe.from_dataframe(image_dataframe, path_col="file")


def test_dataframe_missing_image_files(image_folder: Path, image_dataframe: pd.DataFrame) -> None:
    with pytest.raises(DataNotFoundError, match=r"36 image file.*row 0.*pass base_dir="):
        tfpipe.from_dataframe(image_dataframe)
    df = image_dataframe.copy()
    df.loc[5, "path"] = "circle/gone.jpg"
    with pytest.raises(FileNotFoundError, match=r"1 image file.*gone.jpg' in row 5"):
        tfpipe.from_dataframe(df, base_dir=image_folder)


def test_dataframe_nan_label(image_folder: Path, image_dataframe: pd.DataFrame) -> None:
    df = image_dataframe.head(4).assign(label=[0, 1, np.nan, 1])
    with pytest.raises(SourceError, match="label: missing label in row 2"):
        tfpipe.from_dataframe(df, base_dir=image_folder)


def test_dataframe_unknown_class_name_with_given_schema(
    image_folder: Path, image_dataframe: pd.DataFrame
) -> None:
    schema = tfpipe.Schema(
        {"image": tfpipe.Image(), "label": tfpipe.ClassLabel(names=["circle", "square"])}
    )
    with pytest.raises(SourceError, match=r"label: unknown class name 'triangle'.* row 24"):
        tfpipe.from_dataframe(image_dataframe, base_dir=image_folder, schema=schema)


def test_dataframe_bad_inputs(image_folder: Path, image_dataframe: pd.DataFrame) -> None:
    with pytest.raises(SourceError, match="df must be a pandas DataFrame, got dict"):
        tfpipe.from_dataframe({"path": []})  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="df is empty"):
        tfpipe.from_dataframe(image_dataframe.head(0))
    mixed = image_dataframe.head(2).assign(label=[1, 2.5])
    with pytest.raises(SourceError, match="label: expected class names or int indices"):
        tfpipe.from_dataframe(mixed, base_dir=image_folder)


# ---------------------------------------------------------------- from_arrays


def test_arrays_infer_the_schema() -> None:
    src = tfpipe.from_arrays(
        {
            "image": np.zeros((6, 8, 5), np.uint8),
            "rgb": np.zeros((6, 8, 5, 3), np.uint8),
            "label": np.array([0, 1, 2, 0, 1, 3]),
            "bbox": np.zeros((6, 4), np.float32),
            "caption": np.array(["a", "b", "c", "d", "e", "f"]),
        }
    )
    assert src.schema == tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(8, 5, 1), encoding="raw"),
            "rgb": tfpipe.Image(shape=(8, 5, 3), encoding="raw"),
            "label": tfpipe.ClassLabel(num_classes=4),
            "bbox": tfpipe.Tensor(shape=(4,), dtype="float32"),
            "caption": tfpipe.Text(),
        }
    )
    assert len(src) == 6 and src[-1]["caption"] == "f" and src[5]["label"] == 3
    np.testing.assert_array_equal(src.labels(), [0, 1, 2, 0, 1, 3])
    decoded = src.schema.decode(src.schema.encode(src[2]))
    assert decoded["image"].shape == (8, 5, 1) and str(decoded["caption"]) == "c"


def test_arrays_length_mismatch_and_bad_inputs() -> None:
    with pytest.raises(SourceError, match=r"first dimension.*'x': 3, 'label': 2"):
        tfpipe.from_arrays({"x": np.zeros((3, 2)), "label": np.zeros(2, np.int64)})
    with pytest.raises(SourceError, match="non-empty dict"):
        tfpipe.from_arrays({})
    with pytest.raises(SourceError, match="arrays are empty"):
        tfpipe.from_arrays({"x": np.zeros((0, 2))})
    with pytest.raises(SchemaError, match="arrays: feature 'y' is not in the schema"):
        tfpipe.from_arrays({"y": np.zeros(3)}, schema=tfpipe.Schema({"x": tfpipe.Tensor()}))


def test_source_index_errors() -> None:
    src = tfpipe.from_arrays({"x": np.arange(3.0)})
    assert isinstance(src, tfpipe.Source)
    with pytest.raises(IndexError, match="index 3 is out of range for a source of 3"):
        src[3]
    with pytest.raises(TypeError, match="source indices must be ints, got str"):
        src["0"]  # type: ignore[index]


# ---------------------------------------------------------------- split


def _indices(part: tfpipe.sources.Subset) -> set[int]:
    return {int(i) for i in part.indices}


def test_split_is_disjoint_complete_and_stratified(image_folder: Path) -> None:
    src = tfpipe.from_directory(image_folder)
    parts = src.split({"train": 0.5, "val": 0.25, "test": 0.25}, seed=3)
    assert list(parts) == ["train", "val", "test"]
    sets = [_indices(p) for p in parts.values()]
    assert set().union(*sets) == set(range(len(src)))
    assert sum(len(s) for s in sets) == len(src)
    for part, per_class in zip(parts.values(), (6, 3, 3), strict=True):
        np.testing.assert_array_equal(np.bincount(part.labels(), minlength=3), [per_class] * 3)
        assert part[0] == src[int(part.indices[0])]
        assert part.origin(0) == src.origin(int(part.indices[0]))


def test_split_without_stratify_keeps_sizes(image_folder: Path) -> None:
    src = tfpipe.from_directory(image_folder)
    parts = src.split({"a": 0.7, "b": 0.3}, stratify=False)
    assert (len(parts["a"]), len(parts["b"])) == (25, 11)
    assert not _indices(parts["a"]) & _indices(parts["b"])


def test_split_is_deterministic_per_seed(image_folder: Path) -> None:
    src = tfpipe.from_directory(image_folder)
    fractions = {"train": 0.7, "test": 0.3}
    first = src.split(fractions, seed=1)["test"]
    assert _indices(first) == _indices(src.split(fractions, seed=1)["test"])
    assert _indices(first) != _indices(src.split(fractions, seed=2)["test"])


@pytest.mark.parametrize(
    "fractions",
    [
        {"train": 0.7, "test": 0.2},
        {"train": 1.2, "test": -0.2},
        {"a": 0, "b": 1},
        {},
        [0.5, 0.5],
        {"a": float("nan"), "b": 1.0},
        {"a": True, "b": 0.0},
    ],
)
def test_split_bad_fractions(fractions: object) -> None:
    src = tfpipe.from_arrays({"x": np.arange(10.0)})
    with pytest.raises(ValueError, match="fractions must"):
        src.split(fractions, stratify=False)  # type: ignore[arg-type]


def test_split_refuses_a_negative_seed_naming_it() -> None:
    src = tfpipe.from_arrays({"x": np.arange(10.0)})
    with pytest.raises(ValueError, match=r"seed must be a non-negative int\. Received: seed=-1"):
        src.split({"a": 0.5, "b": 0.5}, seed=-1, stratify=False)


def test_split_warns_when_stratify_is_impossible() -> None:
    src = tfpipe.from_arrays({"x": np.arange(10.0)})
    with pytest.warns(TfpipeWarning, match="stratify=True.*ignored.*no ClassLabel"):
        parts = src.split({"train": 0.8, "test": 0.2})
    assert (len(parts["train"]), len(parts["test"])) == (8, 2)


def test_arrays_that_look_like_images_or_classes_say_why_they_are_tensors() -> None:
    images, digits = np.zeros((40, 28, 28)), np.arange(40) % 10
    with pytest.warns(TfpipeWarning) as caught:
        src = tfpipe.from_arrays({"x": images, "digit": digits, "id": np.arange(40)})
    assert [str(w.message).split(" (")[0] for w in caught] == ["arrays: 'x'", "arrays: 'digit'"]
    assert "made a Tensor, not an Image: only uint8 arrays" in str(caught[0].message)
    assert "(array * 255).astype(np.uint8)" in str(caught[0].message)
    assert "not a ClassLabel: only integer arrays whose name contains 'label'" in str(
        caught[1].message
    )
    assert "'digit_label'" in str(caught[1].message)
    assert "ClassLabel(num_classes=10)" in str(caught[1].message)
    assert src.schema["x"] == tfpipe.Tensor(shape=(28, 28), dtype="float64")
    named = tfpipe.from_arrays({"x": images.astype(np.uint8), "digit_label": digits})
    assert isinstance(named.schema["x"], tfpipe.Image)  # no warning: nothing was a guess
    assert named.schema["digit_label"] == tfpipe.ClassLabel(num_classes=10)


def test_multi_label_splits_keep_every_classs_share() -> None:
    rng = np.random.default_rng(1)
    sets = rng.random((300, 5)) < [0.6, 0.3, 0.1, 0.05, 0.03]  # rare classes too
    sets[:20] = False  # examples without any class
    tags = [np.flatnonzero(row).tolist() for row in sets]
    schema = tfpipe.Schema(
        {"x": tfpipe.Tensor(), "tags": tfpipe.ClassLabel(num_classes=5, multi_label=True)}
    )
    src = tfpipe.from_arrays({"x": np.arange(300.0), "tags": np.array(tags, object)}, schema)
    np.testing.assert_array_equal(src.label_sets(), sets)
    parts = src.split({"train": 0.8, "test": 0.2}, seed=3)  # no warning: it stratifies
    assert abs(len(parts["test"]) - 60) <= 2
    assert set().union(*map(_indices, parts.values())) == set(range(300))
    test_sets = parts["test"].label_sets()
    assert test_sets is not None
    np.testing.assert_allclose(test_sets.sum(axis=0), 0.2 * sets.sum(axis=0), atol=1.01)


def test_split_warns_when_a_class_is_too_small_for_every_split() -> None:
    src = tfpipe.from_arrays({"x": np.arange(7.0), "label": np.array([0, 0, 0, 1, 1, 1, 2])})
    with pytest.warns(TfpipeWarning, match="class 2 has 1 example.*3 splits"):
        parts = src.split({"a": 0.4, "b": 0.3, "c": 0.3})
    assert set().union(*(_indices(p) for p in parts.values())) == set(range(7))
