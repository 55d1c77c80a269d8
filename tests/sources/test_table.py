"""Tables without images: a CSV of Fisher's iris written by from_dataframe and `tfpipe write`,
trained with tfpipe.fit; the schema taken from the columns, and bad cells named."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pandas as pd
import pytest
import scipy

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import SourceError
from tfpipe.format.metadata import DatasetInfo
from tfpipe.training import model_probe

fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function

MEASUREMENTS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
SPECIES = ["setosa", "versicolor", "virginica"]


@pytest.fixture(autouse=True)
def short_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probes of a few hundred ms keep these tests fast; their length is not under test."""
    monkeypatch.setattr(model_probe, "PROBE_SECONDS", 0.1)
    monkeypatch.setattr(fit_module, "INPUT_PROBE_SECONDS", 0.1)


@pytest.fixture
def iris_csv(tmp_path: Path) -> Path:
    """iris.csv: Fisher's 150 flowers (SciPy's copy, in his order: 50 of each species), four
    measurements in cm and the species."""
    rows = np.loadtxt(Path(scipy.__file__).parent / "spatial/tests/data/iris.txt")
    df = pd.DataFrame(rows, columns=MEASUREMENTS)
    df["species"] = np.repeat(SPECIES, 50)
    csv = tmp_path / "iris.csv"
    df.to_csv(csv, index=False)
    return csv


def classifier() -> keras.Model:
    """One input per measurement, by name, as Keras's structured-data examples build it."""
    inputs = {name: keras.Input((1,), name=name) for name in MEASUREMENTS}
    merged = keras.layers.Concatenate()(list(inputs.values()))
    hidden = keras.layers.Dense(16, activation="relu")(merged)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))
    model.compile(
        keras.optimizers.Adam(0.05), "sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return model


def test_a_csv_without_image_paths_takes_its_schema_from_the_columns(iris_csv: Path) -> None:
    src = tfpipe.from_dataframe(pd.read_csv(iris_csv), label_cols="species")
    assert src.schema == tfpipe.Schema(
        {**dict.fromkeys(MEASUREMENTS, tfpipe.Tensor()), "species": tfpipe.ClassLabel(SPECIES)}
    )
    assert src.origin(60) == "row 60" and src.labels().tolist() == [0] * 50 + [1] * 50 + [2] * 50
    example = src.schema.decode(src.schema.encode(src[0]))
    assert [float(example[n]) for n in MEASUREMENTS] == pytest.approx([5.1, 3.5, 1.4, 0.2])
    assert int(example["species"]) == 0


def test_tfpipe_write_then_fit_trains_a_table(iris_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "records" / "iris"
    assert main(["write", str(iris_csv), str(out), "--label-cols", "species"]) == 0
    source = tfpipe.from_dataframe(pd.read_csv(iris_csv), label_cols="species")
    assert DatasetInfo.load(out).schema == source.schema
    model = classifier()
    history = tfpipe.fit(model, str(out), y="species", epochs=30, batch_size=16, verbose=0)
    assert history.history["accuracy"][-1] > 0.8  # chance is 1/3
    report = history.report
    assert report.data_kind == "tensors"
    advice = " ".join([*report.advice, *report.breakdown.advice])
    assert not [p for p in ("decoded images", "store images", "raw pixels") if p in advice]
    named = tfpipe.fit(classifier(), source, x={n: n for n in MEASUREMENTS}, y="species", verbose=0)
    assert named.history["loss"]


def test_each_kind_of_column_gets_its_feature() -> None:
    df = pd.DataFrame(
        {
            "count": [3, 1, 2],
            "flag": [True, False, True],
            "weight": [0.5, 1.5, 2.0],
            "text_number": ["1", "2", "3.5"],
            "notes": ["a", "[brackets] stay text", "42"],
            "tokens": ["[1, 2]", "[3]", "[]"],
            "vector": [[0.5, 1.0], [2.0], [3.0, 4.0, 5.0]],
            "price": [9.5, 3.25, 1.0],
            "grade": ["b", "a", "b"],
        }
    )
    src = tfpipe.from_dataframe(df, label_cols=["price", "grade"])
    assert dict(src.schema) == {
        "count": tfpipe.Tensor(dtype="int64"),
        "flag": tfpipe.Tensor(dtype="int64"),
        "weight": tfpipe.Tensor(),
        "text_number": tfpipe.Tensor(),
        "notes": tfpipe.Text(),
        "tokens": tfpipe.Tensor(shape=(None,), dtype="int64"),
        "vector": tfpipe.Tensor(shape=(None,)),
        "price": tfpipe.Tensor(),  # a float target: regression
        "grade": tfpipe.ClassLabel(["a", "b"]),
    }
    batch = next(iter(tfpipe.Pipeline(src).batch(3).build()))
    assert batch["text_number"].numpy().tolist() == [1.0, 2.0, 3.5]
    assert batch["tokens"].to_list() == [[1, 2], [3], []]
    assert [t.decode() for t in batch["notes"].numpy()] == ["a", "[brackets] stay text", "42"]
    assert batch["grade"].numpy().tolist() == [1, 0, 1]
    with pytest.raises(SourceError, match=r"weight: row 1 holds text.*Received: 'nan'"):
        tfpipe.from_dataframe(pd.DataFrame({"weight": ["1.5", "nan", "2"]}))
    unlabelled = tfpipe.from_dataframe(df)  # no label_cols, no column "label": no target
    assert unlabelled.schema["grade"] == tfpipe.Text() and unlabelled.labels() is None


@pytest.mark.fault(
    "a bad cell in a table without a schema (NaN, text among numbers, a number among lists)",
    reader="from_dataframe, tfpipe write",
    outcome="SourceError naming the column, the row and the cell",
)
@pytest.mark.parametrize(
    ("column", "cells", "message"),
    [
        ("width", [1.5, np.nan, 2.0], r"width: missing value in row 1.*Received: (nan|None)"),
        ("species", ["a", None, "b"], r"species: missing label in row 1.*Received: (nan|None)"),
        ("width", ["1.5", "wide", "2"], r"width: row 1 holds text, but most cells of the "
         r"column hold numbers.*Received: 'wide'"),
        ("tokens", ["[1, 2]", "7", "[3]"], r"tokens: row 1 holds number, but most cells of "
         r"the column hold lists.*Received: '7'"),
        ("tokens", ["[1, 2]", "['a']", "[3]"], r"tokens: row 1 holds a list with 'a'.*"
         r"Received: \"\['a'\]\""),
    ],
)  # fmt: skip
def test_a_bad_cell_of_a_table_is_named(
    tmp_path: Path, column: str, cells: list[Any], message: str
) -> None:
    df = pd.DataFrame({"size": [1.0, 2.0, 3.0], "species": ["a", "b", "a"], column: cells})
    with pytest.raises(SourceError, match=message):
        tfpipe.from_dataframe(df, label_cols="species")
    csv = tmp_path / "table.csv"
    df.to_csv(csv, index=False)
    with pytest.raises(SourceError, match=message):
        tfpipe.from_dataframe(pd.read_csv(csv), label_cols="species")
    assert main(["write", str(csv), str(tmp_path / "out"), "--label-cols", "species"]) == 2


@pytest.mark.fault(
    "a label column missing from a CSV without image paths",
    reader="from_dataframe, tfpipe write",
    outcome="SourceError naming label_cols, the column and the columns there are",
)
def test_a_missing_label_column_is_named(iris_csv: Path, tmp_path: Path) -> None:
    message = r"label_cols: column 'target' is not in the DataFrame; it has \['sepal_length'"
    with pytest.raises(SourceError, match=message):
        tfpipe.from_dataframe(pd.read_csv(iris_csv), label_cols="target")
    assert main(["write", str(iris_csv), str(tmp_path / "out"), "--label-cols", "target"]) == 2
