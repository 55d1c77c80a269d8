"""from_dataframe beyond one image and one class: tag strings, names without an extension,
several image columns, columns the schema declares, and the `tfpipe write` flags for them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import DataNotFoundError, SourceError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo

TAGS = [  # a Kaggle-Planet-like tags column: stray spaces, an empty cell, a repeated tag
    "haze primary",
    "clear primary water",
    "  clear   agriculture primary ",
    "",
    "cloudy",
    "haze primary haze",
] * 5
VOCABULARY = ["agriculture", "clear", "cloudy", "haze", "primary", "water"]
HOT = {  # row -> the expected multi-hot row over VOCABULARY
    0: [0, 0, 0, 1, 1, 0],
    1: [0, 1, 0, 0, 1, 1],
    2: [1, 1, 0, 0, 1, 0],
    3: [0, 0, 0, 0, 0, 0],
    4: [0, 0, 1, 0, 0, 0],
    5: [0, 0, 0, 1, 1, 0],
    26: [1, 1, 0, 0, 1, 0],
}


def _tile(path: Path, value: int, mode: str = "RGB", size: int = 8) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.full((size, size, 3) if mode == "RGB" else (size, size), value, np.uint8)
    PILImage.fromarray(pixels, mode).save(path)


@pytest.fixture
def planet(tmp_path: Path) -> Path:
    """`train_classes.csv` (image_name without extension, tags) and `train-jpg/<name>.jpg`."""
    names = [f"train_{i}" for i in range(len(TAGS))]
    for i, name in enumerate(names):
        _tile(tmp_path / "train-jpg" / f"{name}.jpg", 8 * i)
    csv = tmp_path / "train_classes.csv"
    pd.DataFrame({"image_name": names, "tags": TAGS}).to_csv(csv, index=False)
    return csv


def _planet_source(csv: Path) -> tfpipe.sources.DataFrameSource:
    return tfpipe.from_dataframe(
        pd.read_csv(csv),
        path_col="image_name",
        label_cols=["tags"],
        label_sep=" ",
        image_suffix=".jpg",
        base_dir=csv.parent / "train-jpg",
        image_shape=(8, 8, 3),
    )


def test_tag_strings_give_multi_hot_rows_over_the_sorted_tags(planet: Path) -> None:
    src = _planet_source(planet)
    assert src.schema["tags"] == tfpipe.ClassLabel(VOCABULARY, multi_label=True)
    assert src[0]["image"] == str(planet.parent / "train-jpg" / "train_0.jpg")
    assert src[3]["tags"] == [] and src[5]["tags"] == [3, 4]  # empty cell: no tags; no repeats
    for row, hot in HOT.items():
        np.testing.assert_array_equal(src.schema.load(src[row])["tags"], hot)
    assert src.labels() is None  # multi-label only: split stratifies by the label sets
    sets = src.label_sets()
    assert sets is not None and sets.shape == (len(TAGS), len(VOCABULARY))
    np.testing.assert_array_equal(sets[list(HOT)], np.asarray(list(HOT.values())) > 0)


@pytest.mark.slow
def test_tag_rows_survive_tfrecords_and_pipeline(planet: Path, tmp_path: Path) -> None:
    src = _planet_source(planet)
    prefix = tmp_path / "records" / "train"
    tfpipe.write_tfrecords(src, prefix, num_shards=1, shuffle=False, progress=False)
    batch = next(iter(tfpipe.Pipeline(str(prefix)).batch(len(TAGS)).build()))
    hot = batch["tags"].numpy()
    assert hot.dtype == np.float32 and hot.shape == (len(TAGS), len(VOCABULARY))
    for row, expected in HOT.items():
        np.testing.assert_array_equal(hot[row], expected)
    # the pixels of each row are that row's tile (value 8 * row): rows did not move
    np.testing.assert_allclose(batch["image"].numpy()[:, 0, 0, 0], 8 * np.arange(len(TAGS)), atol=2)
    from_memory = next(iter(tfpipe.Pipeline(src).batch(len(TAGS)).build()))
    np.testing.assert_array_equal(from_memory["tags"].numpy(), hot)


def test_integer_tags_and_separator_per_column(tmp_path: Path) -> None:
    for i in range(3):
        _tile(tmp_path / f"{i}.png", i)
    df = pd.DataFrame(
        {
            "path": ["0.png", "1.png", "2.png"],
            "weather": ["clear", "haze", "clear"],
            "ids": ["3,1", "0", None],
        }
    )
    with pytest.raises(SourceError, match="ids: missing label in row 2"):
        tfpipe.from_dataframe(df, label_cols=["weather", "ids"], base_dir=tmp_path)  # not tags
    src = tfpipe.from_dataframe(
        df, label_cols=["weather", "ids"], label_sep={"ids": ","}, base_dir=tmp_path
    )
    assert src.schema["weather"] == tfpipe.ClassLabel(["clear", "haze"])
    assert src.schema["ids"] == tfpipe.ClassLabel(num_classes=4, multi_label=True)
    assert [src[i]["ids"] for i in range(3)] == [[3, 1], [0], []]
    np.testing.assert_array_equal(src.labels(), [0, 1, 0])
    named = tfpipe.ClassLabel(["0", "3", "1"], multi_label=True)  # digits as names: not indices
    schema = tfpipe.Schema({**src.schema, "ids": named})
    src = tfpipe.from_dataframe(df, base_dir=tmp_path, schema=schema, label_sep={"ids": ","})
    assert [src[i]["ids"] for i in range(3)] == [[1, 2], [0], []]
    with pytest.raises(SourceError, match="ids: no row has a class"):
        tfpipe.from_dataframe(
            df.assign(ids=["", " ", None]), label_cols="ids", label_sep=",", base_dir=tmp_path
        )


@pytest.mark.slow
def test_two_image_columns_both_become_images(tmp_path: Path) -> None:
    rows = []
    for i in range(6):
        _tile(tmp_path / "images" / f"{i}.png", 40 * i)
        _tile(tmp_path / "masks" / f"{i}.png", i % 3, mode="L")
        rows.append({"image": f"images/{i}", "mask": f"masks/{i}", "label": i % 2})
    df = pd.DataFrame(rows)
    src = tfpipe.from_dataframe(
        df, image_cols=["image", "mask"], image_suffix=".png", base_dir=tmp_path
    )
    assert list(src.schema) == ["image", "mask", "label"]
    assert src.schema["image"] == src.schema["mask"] == tfpipe.Image(encoding="auto")
    assert src[4] == {
        "image": str(tmp_path / "images" / "4.png"),
        "mask": str(tmp_path / "masks" / "4.png"),
        "label": 0,
    }
    assert src.origin(4) == f"row 4 ({tmp_path / 'images' / '4.png'})"
    # a schema decides how each image column is stored and decoded: a one-channel PNG mask
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(8, 8, 3), encoding="png"),
            "mask": tfpipe.Image(shape=(8, 8, 1), encoding="png"),
            "label": tfpipe.ClassLabel(num_classes=2),
        }
    )
    src = tfpipe.from_dataframe(df, schema=schema, image_suffix=".png", base_dir=tmp_path)
    assert src[4]["mask"] == str(tmp_path / "masks" / "4.png")
    prefix = tmp_path / "records"
    tfpipe.write_tfrecords(src, prefix, num_shards=1, shuffle=False, progress=False)
    for source in (str(prefix), src):
        batch = next(iter(tfpipe.Pipeline(source).batch(6).build()))
        assert batch["image"].shape == (6, 8, 8, 3) and batch["mask"].shape == (6, 8, 8, 1)
        assert batch["image"].numpy()[:, 0, 0, 0].tolist() == [40 * i for i in range(6)]
        assert batch["mask"].numpy()[:, 3, 3, 0].tolist() == [0, 1, 2, 0, 1, 2]


def test_schema_declares_tensor_and_text_columns(tmp_path: Path) -> None:
    for i in range(3):
        _tile(tmp_path / f"{i}.jpg", i)
    df = pd.DataFrame(
        {
            "photo": ["0.jpg", "1.jpg", "2.jpg"],
            "depth": [0.5, 1.5, np.nan],
            "box": ["[0, 0, 4, 4]", "[1, 1, 2, 2]", "[0, 2, 3, 5]"],
            "caption": ["a dark tile", "[brackets] stay text", "x"],
            "unused": [1, 2, 3],
        }
    )
    schema = tfpipe.Schema(
        {
            "photo": tfpipe.Image(),
            "depth": tfpipe.Tensor(),
            "box": tfpipe.Tensor(shape=(4,), dtype="int64"),
            "caption": tfpipe.Text(),
        }
    )
    src = tfpipe.from_dataframe(df, schema=schema, base_dir=tmp_path)  # no "image": no path_col
    example = src[1]
    assert example["photo"] == str(tmp_path / "1.jpg")
    assert example["caption"] == "[brackets] stay text"
    np.testing.assert_array_equal(example["box"], [1, 1, 2, 2])
    decoded = src.schema.decode(src.schema.encode(src[2]))
    assert np.isnan(decoded["depth"]) and str(decoded["caption"]) == "x"  # NaN is data here
    assert src.origin(2) == f"row 2 ({tmp_path / '2.jpg'})"


def test_a_table_without_images(tmp_path: Path) -> None:
    df = pd.DataFrame({"x": ["[1.0, 2.0]", "[3.0, 4.0]"], "y": [0, 1]})
    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(2,)), "y": tfpipe.ClassLabel(["no", "yes"])})
    src = tfpipe.from_dataframe(df, schema=schema)
    assert len(src) == 2 and src.origin(1) == "row 1" and src.groups() is None
    batch = next(iter(tfpipe.Pipeline(src).batch(2).build()))
    np.testing.assert_array_equal(batch["x"].numpy(), [[1, 2], [3, 4]])
    assert batch["y"].numpy().tolist() == [0, 1]


@pytest.mark.fault(
    "a DataFrame column of mask paths taken as a label column",
    reader="from_dataframe",
    outcome="SourceError naming the column and image_cols=",
)
def test_a_column_of_paths_is_never_a_class_label(tmp_path: Path) -> None:
    for i in range(20):
        _tile(tmp_path / "images" / f"{i}.jpg", i)
    df = pd.DataFrame(
        {
            "path": [f"images/{i}.jpg" for i in range(20)],
            "mask": [f"masks/{i}.png" for i in range(20)],
        }
    )
    message = r"label_cols: column 'mask' holds file paths \(e.g. 'masks/0.png'; 20 distinct .*"
    with pytest.raises(SourceError, match=message + r"image_cols=\[\.\.\., 'mask'\]"):
        tfpipe.from_dataframe(df, label_cols=["mask"], base_dir=tmp_path)


@pytest.mark.fault(
    "a DataFrame id column (as many values as rows) taken as a label column",
    reader="from_dataframe",
    outcome="warning naming the column and the count of distinct values",
)
def test_a_column_of_ids_is_warned_about(tmp_path: Path) -> None:
    for i in range(24):
        _tile(tmp_path / f"{i}.jpg", i)
    df = pd.DataFrame({"path": [f"{i}.jpg" for i in range(24)], "label": range(100, 124)})
    message = r"column 'label' has 24 distinct values among 24 rows.*schema= with tfpipe.Tensor"
    with pytest.warns(TfpipeWarning, match=message):
        src = tfpipe.from_dataframe(df, base_dir=tmp_path)
    assert src.schema["label"] == tfpipe.ClassLabel(num_classes=124)
    schema = tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.Tensor(dtype="int64")})
    assert tfpipe.from_dataframe(df, base_dir=tmp_path, schema=schema)[5]["label"] == 105
    few = df.head(19)  # below 20 rows: too few to tell
    assert tfpipe.from_dataframe(few, base_dir=tmp_path).schema["label"].num_classes == 119


@pytest.mark.fault(
    "an image name without its extension, the file under another suffix",
    reader="from_dataframe(image_suffix=)",
    outcome="DataNotFoundError naming the row, the path tried and the cell",
)
def test_missing_file_names_the_row_and_the_path_tried(planet: Path) -> None:
    tried = planet.parent / "train-jpg" / "train_7.jpg"
    tried.rename(tried.with_suffix(".tif"))
    message = rf"image_name: 1 image file\(s\) do not exist, first '{tried}' in row 7 \(the cell"
    with pytest.raises(DataNotFoundError, match=message + r" 'train_7' \+ image_suffix"):
        _planet_source(planet)


@pytest.mark.fault(
    "contradictory from_dataframe column options",
    reader="from_dataframe",
    outcome="SourceError naming the argument",
)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path_col": "path", "image_cols": ["path"]}, "path_col and image_cols: pass one"),
        ({"label_sep": {"size": " "}}, r"label_sep: 'size' is not one of the columns \['label'\]"),
        ({"label_sep": ""}, "label_sep must be a non-empty string"),
        ({"label_sep": " ", "label_cols": []}, "label_sep is given, but there is no column"),
        ({"image_suffix": {"mask": ".png"}}, "image_suffix: 'mask' is not one of the columns"),
        ({"image_cols": ["path", "label"]}, "label_cols: 'label' is also an image feature"),
        ({"image_cols": ["mask"]}, "image_cols: column 'mask' is not in the DataFrame"),
        (
            {"schema": tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.Tensor()}),
             "label_sep": " "},
            "label_sep: schema= declares no multi-label ClassLabel",
        ),
        (
            {"schema": tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.ClassLabel(["a"])}),
             "label_sep": {"label": " "}},
            "label_sep: column 'label' is declared ClassLabel",
        ),
        (
            {"schema": tfpipe.Schema({"image": tfpipe.Image(), "other": tfpipe.Text()})},
            "label_cols: column 'other' is not in the DataFrame",
        ),
        (
            {"schema": tfpipe.Schema({"photo": tfpipe.Image()}), "path_col": "path"},
            "path_col: feature 'image' is not in the schema",
        ),
        (
            {"schema": tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.Text(),
                                      "x": tfpipe.Tensor()}), "label_cols": ["label"]},
            "schema: feature 'x' has no column to read",
        ),
        (
            {"schema": tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.Text()}),
             "image_cols": ["label"]},
            "image_cols: column 'label' is read as file paths, but schema= declares 'label' as "
            "Text",
        ),
    ],
)  # fmt: skip
def test_contradictory_options_are_named(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    _tile(tmp_path / "a.jpg", 1)
    df = pd.DataFrame({"path": ["a.jpg"], "label": ["x"]})
    with pytest.raises(SourceError, match=message):
        tfpipe.from_dataframe(df, base_dir=tmp_path, **kwargs)  # type: ignore[arg-type]


def test_cli_writes_tag_strings_and_names_without_extension(
    planet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "train"
    argv = ["write", str(planet), str(out), "--path-col", "image_name", "--label-cols", "tags",
            "--label-sep", " ", "--image-suffix", ".jpg", "--base-dir",
            str(planet.parent / "train-jpg"), "--no-shuffle", "--shards", "1"]  # fmt: skip
    assert main(argv) == 0
    assert "train: 30 examples in 1 shard(s)" in capsys.readouterr().out
    info = DatasetInfo.load(out)
    assert info.schema["tags"] == tfpipe.ClassLabel(VOCABULARY, multi_label=True)
    hot = [e["tags"].tolist() for e in tfpipe.read_tfrecords(out).as_numpy_iterator()]
    assert {row: hot[row] for row in HOT} == HOT


def test_cli_writes_two_image_columns(tmp_path: Path) -> None:
    for i in range(4):
        _tile(tmp_path / "images" / f"{i}.jpg", 50 * i)
        _tile(tmp_path / "masks" / f"{i}.jpg", 10 * i)
    pd.DataFrame(
        {"image": [f"images/{i}" for i in range(4)], "mask": [f"masks/{i}" for i in range(4)]}
    ).to_csv(tmp_path / "pairs.csv", index=False)
    out = tmp_path / "pairs"
    argv = ["write", str(tmp_path / "pairs.csv"), str(out), "--image-cols", "image,mask",
            "--label-cols", "", "--image-suffix", ".jpg", "--image-size", "4x4",
            "--no-shuffle"]  # fmt: skip
    assert main(argv) == 0
    schema = DatasetInfo.load(out).schema
    assert schema == tfpipe.Schema(
        {name: tfpipe.Image(shape=(4, 4, 3), encoding="raw") for name in ("image", "mask")}
    )
    examples = list(tfpipe.read_tfrecords(out).as_numpy_iterator())
    assert [int(e["mask"][0, 0, 0]) for e in examples] == [0, 10, 20, 30]


@pytest.mark.fault(
    "a CSV-only flag (--label-sep) given with an image folder",
    reader="tfpipe write",
    outcome="exit 2, one line naming the flag",
)
def test_cli_refuses_csv_flags_for_a_folder(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["write", str(image_folder), str(tmp_path / "o"), "--label-sep", " "]) == 2
    err = capsys.readouterr().err
    assert "tfpipe write: error: --label-sep applies to a CSV SRC" in err


@pytest.mark.fault(
    "a bad cell in a DataFrame column the schema declares (path, tensor, text)",
    reader="from_dataframe(schema=)",
    outcome="SourceError naming the column and the row",
)
@pytest.mark.parametrize(
    ("column", "cells", "message"),
    [
        ("photo", ["0.jpg", None], "photo: missing file path in row 1"),
        ("box", ["[0, 0, 4, 4]", "[1, 2, 3]"], r"box: expected shape \(4,\), got \(3,\) in row 1"),
        ("box", ["[0, 0, 4, 4]", "[0.5, 1, 2, 3]"], "box: expected int64, got non-integral"),
        ("caption", [None, "x"], "caption: missing text in row 0"),
        ("caption", ["a", 7], "caption: expected str or bytes, got 7 in row 1"),
    ],
)
def test_bad_cells_of_declared_columns_are_named(
    tmp_path: Path, column: str, cells: list[object], message: str
) -> None:
    _tile(tmp_path / "0.jpg", 1)
    _tile(tmp_path / "1.jpg", 2)
    df = pd.DataFrame(
        {"photo": ["0.jpg", "1.jpg"], "box": ["[0, 0, 4, 4]"] * 2, "caption": ["a", "b"]}
    )
    schema = tfpipe.Schema(
        {
            "photo": tfpipe.Image(),
            "box": tfpipe.Tensor(shape=(4,), dtype="int64"),
            "caption": tfpipe.Text(),
        }
    )
    with pytest.raises(SourceError, match=message):
        tfpipe.from_dataframe(df.assign(**{column: cells}), schema=schema, base_dir=tmp_path)


def test_cli_schema_file_decides_the_columns_and_names_keep_their_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["0001", "0002", "0010"]  # read as numbers, they would be 1, 2, 10
    for i, name in enumerate(names):
        _tile(tmp_path / f"{name}.png", 50 * i)
        _tile(tmp_path / f"{name}_mask.png", i + 1, mode="L")
    pd.DataFrame(
        {
            "image": names,
            "mask": [f"{n}_mask" for n in names],
            "tags": ["a b", "", "b"],
            "id": [7, 8, 9],
        }
    ).to_csv(tmp_path / "rows.csv", index=False)
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(8, 8, 3), encoding="png"),
            "mask": tfpipe.Image(shape=(8, 8, 1), encoding="png"),
            "tags": tfpipe.ClassLabel(["b", "a"], multi_label=True),
            "id": tfpipe.Text(),
        }
    )
    (tmp_path / "schema.json").write_text(schema.to_json())
    out = tmp_path / "out"
    schema_file = str(tmp_path / "schema.json")
    flags = ["--schema", schema_file, "--label-sep", " ", "--image-suffix", ".png"]
    argv = ["write", str(tmp_path / "rows.csv"), str(out), "--no-shuffle", *flags]
    assert main(argv) == 0, capsys.readouterr().err
    assert DatasetInfo.load(out).schema == schema  # stored as declared: PNG, 1 channel
    examples = list(tfpipe.read_tfrecords(out).as_numpy_iterator())
    assert [int(e["image"][0, 0, 0]) for e in examples] == [0, 50, 100]
    assert [int(e["mask"][0, 0, 0]) for e in examples] == [1, 2, 3]
    assert [e["id"] for e in examples] == [b"7", b"8", b"9"]  # Text: read as text
    assert [e["tags"].tolist() for e in examples] == [[1, 1], [0, 0], [1, 0]]

    assert main([*argv, "--image-size", "4x4"]) == 2
    assert "--image-size describes inferred images" in capsys.readouterr().err
