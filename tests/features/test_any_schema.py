"""Any supervised pair: tables, two inputs, two outputs through tfpipe.fit; padded lists; the
report and explain() following what the data is."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DecodeError, SchemaError, SourceError, TfpipeWarning
from tfpipe.training import model_probe
from tfpipe.training.report import FitReport
from tfpipe.training.throughput import Throughput

fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function

ROWS = 200
COLUMNS = 8
# What the advice says about images; none of it belongs in the advice for a table.
IMAGE_ADVICE = ("store images", "raw pixels", "JPEG", "uint8", "decoded images", "--image-size")


def image_advice(advice: tuple[str, ...]) -> list[str]:
    return [phrase for phrase in IMAGE_ADVICE if phrase in " ".join(advice)]


@pytest.fixture(autouse=True)
def short_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probes of a few hundred ms keep these tests fast; their length is not under test."""
    monkeypatch.setattr(model_probe, "PROBE_SECONDS", 0.1)
    monkeypatch.setattr(fit_module, "INPUT_PROBE_SECONDS", 0.1)


@pytest.fixture(scope="module")
def table() -> dict[str, np.ndarray]:
    """200 rows of 8 float features, a linear regression target and a class from its sign."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(ROWS, COLUMNS)).astype(np.float32)
    target = features @ rng.normal(size=COLUMNS).astype(np.float32)
    return {
        "features": features,
        "left": features[:, :4],
        "right": features[:, 4:],
        "price": target,
        "label": (target > 0).astype(np.int64),
    }


@pytest.fixture(scope="module")
def table_records(table: dict[str, np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> str:
    prefix = str(tmp_path_factory.mktemp("table") / "train")
    tfpipe.write_tfrecords(tfpipe.from_arrays(table), prefix, num_shards=2)
    return prefix


def compiled(inputs: Any, outputs: Any, loss: Any) -> keras.Model:
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.Adam(0.05), loss)
    return model


def regression(width: int = COLUMNS) -> keras.Model:
    inputs = keras.Input((width,))
    return compiled(inputs, keras.layers.Dense(1)(inputs), "mse")


def two_inputs(**names: str) -> keras.Model:
    left = keras.Input((4,), **names_of(names, "left"))
    right = keras.Input((4,), **names_of(names, "right"))
    merged = keras.layers.Concatenate()([left, right])
    return compiled([left, right], keras.layers.Dense(1)(merged), "mse")


def names_of(names: dict[str, str], key: str) -> dict[str, str]:
    return {"name": names[key]} if key in names else {}


def losses(history: keras.callbacks.History, key: str = "loss") -> list[float]:
    return [float(v) for v in history.history[key]]


@pytest.mark.slow
def test_table_trains_through_fit_and_the_loss_goes_down(table_records: str) -> None:
    history = tfpipe.fit(
        regression(), table_records, x="features", y="price", epochs=4, batch_size=20, verbose=0
    )
    loss = losses(history)
    assert loss[-1] < 0.5 * loss[0]
    assert history.report.data_kind == "tensors"
    assert history.report.input_kind == "TFRecords"
    assert image_advice(history.report.advice) == []


def test_a_class_target_of_a_table_trains(table_records: str) -> None:
    inputs = keras.Input((COLUMNS,))
    model = compiled(
        inputs,
        keras.layers.Dense(2)(inputs),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = tfpipe.fit(model, table_records, x="features", y="label", epochs=4, verbose=0)
    assert losses(history)[-1] < losses(history)[0]


def test_a_source_trains_directly_with_several_scalar_columns(
    table: dict[str, np.ndarray],
) -> None:
    # Scalar columns as separate features, fed by name to one Input per column (Keras's way).
    columns = {f"c{i}": table["features"][:, i] for i in range(3)}
    source = tfpipe.from_arrays({**columns, "price": table["features"][:, :3].sum(axis=1)})
    inputs = {name: keras.Input((1,), name=name) for name in columns}
    merged = keras.layers.Concatenate()(list(inputs.values()))
    model = compiled(inputs, keras.layers.Dense(1)(merged), "mse")
    history = tfpipe.fit(
        model, source, x={n: n for n in columns}, y="price", epochs=4, batch_size=20, verbose=0
    )
    assert history.report.input_kind == "source"
    assert losses(history)[-1] < 0.5 * losses(history)[0]


def test_two_inputs_train_by_position_and_by_name(table_records: str) -> None:
    by_position = tfpipe.fit(
        two_inputs(), table_records, x=["left", "right"], y="price", epochs=3, verbose=0
    )
    assert losses(by_position)[-1] < losses(by_position)[0]
    model = two_inputs(left="a", right="b")
    by_name = tfpipe.fit(
        model, table_records, x={"b": "right", "a": "left"}, y="price", epochs=1, verbose=0
    )
    assert by_name.history["loss"]


@pytest.mark.slow
def test_two_outputs_train_with_a_loss_each(table_records: str) -> None:
    inputs = keras.Input((COLUMNS,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    price = keras.layers.Dense(1, name="price")(hidden)
    label = keras.layers.Dense(2, name="label")(hidden)
    model = keras.Model(inputs, [price, label])
    model.compile(
        keras.optimizers.Adam(0.05),
        ["mse", keras.losses.SparseCategoricalCrossentropy(from_logits=True)],
    )
    history = tfpipe.fit(
        model,
        table_records,
        x="features",
        y=["price", "label"],
        validation=table_records,
        epochs=3,
        verbose=0,
    )
    assert losses(history)[-1] < losses(history)[0]
    assert "val_loss" in history.history
    model.compile(
        "adam",
        {"price": "mse", "label": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    by_name = tfpipe.fit(
        model, table_records, x="features", y={"label": "label", "price": "price"}, verbose=0
    )
    assert {"price_loss", "label_loss"} <= set(by_name.history)


def test_a_pipeline_and_a_dataset_of_dicts_take_x_and_y(
    table_records: str, table: dict[str, np.ndarray]
) -> None:
    pipeline = tfpipe.Pipeline(table_records).batch(25)
    history = tfpipe.fit(regression(), pipeline, x="features", y="price", verbose=0)
    assert history.report.data_kind == "tensors"
    dicts = tf.data.Dataset.from_tensor_slices(table).batch(25)
    history = tfpipe.fit(regression(), dicts, x="features", y="price", verbose=0)
    assert history.report.input_kind == "tf.data"
    assert history.report.data_kind == "tensors"  # from the batch shapes: no schema


@pytest.mark.fault(
    "x or y names a feature the data does not have",
    reader="tfpipe.fit (path, source, Pipeline, tf.data of dicts)",
    outcome="SchemaError naming x or y, the feature and the features there are",
)
def test_unknown_x_or_y_is_a_named_error(table_records: str, table: dict[str, np.ndarray]) -> None:
    for data in (
        table_records,
        tfpipe.from_arrays(table),
        tfpipe.Pipeline(table_records).batch(8),
        tf.data.Dataset.from_tensor_slices(table).batch(8),
    ):
        with pytest.raises(SchemaError, match=r"feature 'prices' .*\(y='prices'\).*price"):
            tfpipe.fit(regression(), data, x="features", y="prices", verbose=0)
    with pytest.raises(SchemaError, match=r"feature 'rigth' .*\(x=\['left', 'rigth'\]\)"):
        tfpipe.fit(two_inputs(), table_records, x=["left", "rigth"], y="price", verbose=0)
    other = tfpipe.from_arrays({"features": table["features"], "cost": table["price"]})
    with pytest.raises(SchemaError, match=r"^validation \(ArraySource\).*\(y='price'\)"):
        tfpipe.fit(
            regression(), table_records, x="features", y="price", validation=other, verbose=0
        )


@pytest.mark.fault(
    "a table (no Image + ClassLabel pair) given without x and y",
    reader="tfpipe.fit (path, Pipeline)",
    outcome="SchemaError saying to pass x=... and y=...",
)
def test_a_table_without_x_and_y_says_to_pass_them(table_records: str) -> None:
    with pytest.raises(SchemaError, match=r"schema has .*Pass x=\.\.\. and y=\.\.\."):
        tfpipe.fit(regression(), table_records, verbose=0)
    with pytest.raises(SchemaError, match=r"yields dicts of features .* pass x=\.\.\."):
        tfpipe.fit(regression(), tfpipe.Pipeline(table_records).batch(8), verbose=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"x": "features"}, ValueError, r"pass y=\.\.\. too"),
        ({"x": ["features", 3], "y": "price"}, ValueError, r"x must be a feature name"),
        ({"x": {}, "y": "price"}, ValueError, r"x must be a feature name"),
        (
            {"x": ["left", "right"], "y": "price"},
            SchemaError,
            r"x=\['left', 'right'\] names 2 features, but the model has 1 input",
        ),
    ],
)
def test_bad_x_and_y_are_named(
    table_records: str, kwargs: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        tfpipe.fit(regression(), table_records, verbose=0, **kwargs)


def test_x_and_y_are_refused_where_they_cannot_apply(
    table_records: str, table: dict[str, np.ndarray]
) -> None:
    loader = tfpipe.SequenceLoader(tfpipe.from_arrays(table), x="features", y="price")
    with pytest.raises(ValueError, match=r"data is a SequenceLoader, which yields its own"):
        tfpipe.fit(regression(), loader, x="features", y="price", verbose=0)
    supervised = tfpipe.Pipeline(table_records).batch(8).as_supervised("features", "price")
    assert supervised.supervised == ("features", "price")
    with pytest.raises(ValueError, match=r"already yields \(x, y\) pairs .*one place"):
        tfpipe.fit(regression(), supervised, x="features", y="price", verbose=0)
    pairs = tf.data.Dataset.from_tensor_slices((np.zeros((8, 8)), np.zeros(8))).batch(4)
    with pytest.raises(ValueError, match="x and y select features of example dicts"):
        tfpipe.fit(regression(), pairs, x="features", y="price", verbose=0)


def test_the_kind_of_data_of_a_dataset_comes_from_its_batch_shapes() -> None:
    data_kind_of = fit_module._data_kind_of
    assert data_kind_of((tf.zeros((4, 8, 8, 3)), tf.zeros(4))) == "images"
    assert data_kind_of(((tf.zeros((4, 8)), tf.zeros((4, 8, 8, 1))), tf.zeros(4))) == "images"
    assert data_kind_of(({"a": tf.zeros((4, 1)), "b": tf.zeros(4)}, tf.zeros(4))) == "tensors"
    assert data_kind_of((tf.zeros((4, 10, 3)), tf.zeros(4))) is None  # sequences or grey images


# Variable-length lists: ragged by default, padded when asked.

LISTS = [[1, 2, 3], [4], [], [5, 6, 7, 8, 9], [10, 11]]


@pytest.fixture(scope="module")
def list_records(tmp_path_factory: pytest.TempPathFactory) -> str:
    schema = tfpipe.Schema(
        {
            "tokens": tfpipe.Tensor(shape=(None,), dtype="int64"),
            "points": tfpipe.Tensor(shape=(None, 2), dtype="float32"),
            "label": tfpipe.Tensor(dtype="int64"),
        }
    )
    examples = [
        {"tokens": tokens, "points": np.full((len(tokens), 2), i, np.float32), "label": i}
        for i, tokens in enumerate(LISTS)
    ]
    prefix = str(tmp_path_factory.mktemp("lists") / "lists")
    tfpipe.write_tfrecords(examples, prefix, schema=schema, num_shards=1, shuffle=False)
    return prefix


def in_order(pipeline: tfpipe.Pipeline) -> dict[str, Any]:
    (batch,) = list(pipeline.batch(len(LISTS)).build())
    order = np.argsort(batch["label"].numpy())
    return {name: tf.gather(value, order) for name, value in batch.items()}


def test_variable_lists_stay_ragged_without_pad(list_records: str) -> None:
    batch = in_order(tfpipe.Pipeline(list_records))
    assert isinstance(batch["tokens"], tf.RaggedTensor)
    assert batch["tokens"].to_list() == LISTS
    assert "pad" not in tfpipe.Pipeline(list_records).explain()


def test_pad_gives_the_exact_padded_rows(list_records: str) -> None:
    pipeline = tfpipe.Pipeline(list_records, pad={"tokens": 6, "points": 5}, pad_value=-1)
    batch = in_order(pipeline)
    expected = np.array([tokens + [-1] * (6 - len(tokens)) for tokens in LISTS])
    np.testing.assert_array_equal(batch["tokens"].numpy(), expected)
    assert batch["tokens"].dtype == tf.int64
    points = batch["points"].numpy()
    assert points.shape == (len(LISTS), 5, 2)
    for i, tokens in enumerate(LISTS):
        np.testing.assert_array_equal(points[i, : len(tokens)], i)
        np.testing.assert_array_equal(points[i, len(tokens) :], -1)
    plan = pipeline.explain()
    assert "pad tokens to 6 values with -1 (longer values: an error)" in plan
    assert "pad points to 5 values with -1.0" in plan
    spec = pipeline.batch(2).build().element_spec
    assert spec["tokens"].shape.as_list() == [None, 6]


@pytest.mark.fault(
    "a list longer than the pad length",
    reader="Pipeline(pad=...)",
    outcome="error naming the feature, the pad length and the longest list (never cut)",
)
def test_a_list_longer_than_the_pad_is_an_error_naming_it(list_records: str) -> None:
    pipeline = tfpipe.Pipeline(list_records, pad={"tokens": 4})
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"tokens: a value is longer than its pad length 4 .*Longest in this batch:\] \[5\]",
    ):
        in_order(pipeline)


def test_truncate_cuts_longer_values_and_counts_them(list_records: str) -> None:
    pipeline = tfpipe.Pipeline(list_records, pad={"tokens": 2, "points": 3}, truncate=True)
    assert pipeline.truncated() == {"tokens": 0, "points": 0}
    batch = in_order(pipeline)
    expected = [[*tokens, 0, 0][:2] for tokens in LISTS]
    np.testing.assert_array_equal(batch["tokens"].numpy(), expected)
    assert batch["points"].shape == (len(LISTS), 3, 2)
    assert pipeline.truncated() == {"tokens": 2, "points": 1}  # [1, 2, 3] and [5, ..., 9]
    assert "pad tokens to 2 values with 0 (longer values: cut to it, counted)" in (
        pipeline.explain()
    )


@pytest.mark.fault(
    "lists cut by Pipeline(pad=..., truncate=True)",
    reader="tfpipe.training.fit",
    outcome="TfpipeWarning counting the values cut, per feature",
)
def test_fit_warns_about_the_values_it_cut(list_records: str) -> None:
    inputs = keras.Input((2,))
    model = compiled(inputs, keras.layers.Dense(1)(inputs), "mse")
    pipeline = tfpipe.Pipeline(list_records, pad={"tokens": 2}, truncate=True).batch(5)
    with pytest.warns(TfpipeWarning, match=r"data: \d+ value\(s\) of 'tokens' were cut"):
        tfpipe.fit(model, pipeline, x="tokens", y="label", report=False, verbose=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"truncate": True}, ValueError, r"truncate must be True or False, and applies with pad"),
        ({"pad": {"tokens": 4}, "truncate": "yes"}, ValueError, r"truncate must be True or"),
        ({"pad": {"label": 4}}, SchemaError, r"pad: feature 'label' is Tensor"),
        ({"pad": {"tokenz": 4}}, SchemaError, r"pad: feature 'tokenz' is not in"),
        ({"pad": {"tokens": 0}}, ValueError, r"pad\['tokens'\] must be a positive int"),
        ({"pad": 16}, ValueError, r"pad must be a dict of feature name -> length"),
        ({"pad": {"tokens": 4}, "pad_value": 0.5}, ValueError, r"pad_value=0.5 is not a value"),
        ({"pad": {"tokens": 4}, "pad_value": "x"}, ValueError, r"pad_value must be a number"),
    ],
)
@pytest.mark.parametrize("loader", ["Pipeline", "SequenceLoader"])
def test_bad_pad_arguments_are_named(
    list_records: str, kwargs: dict[str, Any], error: type, message: str, loader: str
) -> None:
    with pytest.raises(error, match=message):
        if loader == "Pipeline":
            tfpipe.Pipeline(list_records, **kwargs)
        else:
            tfpipe.SequenceLoader(tfpipe.from_tfrecords(list_records), x="label", y=None, **kwargs)


def sequence_loader(list_records: str, **kwargs: Any) -> tfpipe.SequenceLoader:
    """A SequenceLoader of the list records, one batch of them all, in the order written."""
    source = tfpipe.from_tfrecords(list_records)
    return tfpipe.SequenceLoader(source, batch_size=len(LISTS), shuffle=False, **kwargs)


def test_sequence_loader_pads_as_the_pipeline_does(list_records: str) -> None:
    pad = {"tokens": 6, "points": 5}
    loader = sequence_loader(list_records, x=["tokens", "points"], y="label", pad=pad, pad_value=-1)
    (tokens, points), label = loader[0]
    assert label.tolist() == list(range(len(LISTS)))
    assert (tokens.dtype, points.dtype) == (np.int64, np.float32)
    assert (tokens.shape, points.shape) == ((len(LISTS), 6), (len(LISTS), 5, 2))
    expected = in_order(tfpipe.Pipeline(list_records, pad=pad, pad_value=-1))
    np.testing.assert_array_equal(tokens, expected["tokens"].numpy())
    np.testing.assert_array_equal(points, expected["points"].numpy())
    assert (tokens[1, 1:] == -1).all() and (points[2] == -1).all()


@pytest.mark.fault(
    "a list longer than the pad length",
    reader="SequenceLoader(pad=...)",
    outcome="DecodeError naming the feature, the pad length, the list's length and the example",
)
def test_sequence_loader_names_a_list_longer_than_the_pad(list_records: str) -> None:
    loader = sequence_loader(list_records, x="tokens", y="label", pad={"tokens": 4})
    with pytest.raises(
        DecodeError,
        match=r"tokens: a value is longer than its pad length 4 .*Received: a value of 5 rows "
        r"in record 3 of .*lists",
    ):
        loader[0]


def test_sequence_loader_truncates_and_counts_as_the_pipeline_does(list_records: str) -> None:
    pad = {"tokens": 2, "points": 3}
    loader = sequence_loader(list_records, x=["tokens", "points"], y=None, pad=pad, truncate=True)
    assert loader.truncated() == {"tokens": 0, "points": 0}
    ((tokens, points),) = loader[0]
    pipeline = tfpipe.Pipeline(list_records, pad=pad, truncate=True)
    expected = in_order(pipeline)
    np.testing.assert_array_equal(tokens, expected["tokens"].numpy())
    np.testing.assert_array_equal(points, expected["points"].numpy())
    assert loader.truncated() == pipeline.truncated() == {"tokens": 2, "points": 1}
    with pytest.raises(ValueError, match=r"pass one of them.*use_multiprocessing=True"):
        sequence_loader(list_records, x="tokens", pad=pad, truncate=True, use_multiprocessing=True)


@pytest.mark.fault(
    "lists cut by SequenceLoader(pad=..., truncate=True)",
    reader="tfpipe.training.fit",
    outcome="TfpipeWarning counting the values cut, per feature",
)
def test_fit_warns_about_the_values_a_sequence_loader_cut(list_records: str) -> None:
    inputs = keras.Input((2,))
    model = compiled(inputs, keras.layers.Dense(1)(inputs), "mse")
    loader = sequence_loader(list_records, x="tokens", y="label", pad={"tokens": 2}, truncate=True)
    with pytest.warns(TfpipeWarning, match=r"data: \d+ value\(s\) of 'tokens' were cut"):
        tfpipe.fit(model, loader, report=False, verbose=0)


def test_padded_lists_train_through_fit(list_records: str) -> None:
    inputs = keras.Input((6,))
    model = compiled(inputs, keras.layers.Dense(1)(inputs), "mse")
    pipeline = tfpipe.Pipeline(list_records, pad={"tokens": 6}).batch(2)
    history = tfpipe.fit(model, pipeline, x="tokens", y="label", verbose=0)
    assert history.history["loss"]


# The report and explain() follow the data.


def report_of(data_kind: str | None, kind: str, input_rate: float, **kwargs: Any) -> Any:
    return FitReport.build(
        input_alone=Throughput(input_rate, 1.0, 0.1, 10, 640),
        model_examples_per_s=1000.0,
        achieved_examples_per_s=500.0,
        input_kind=kind,
        batch_size=64,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
        data_kind=data_kind,
        **kwargs,
    )


@pytest.mark.parametrize("kind", ["TFRecords", "Pipeline", "PyDataset", "tf.data", "source"])
@pytest.mark.parametrize("input_rate", [300.0, 3000.0, 1200.0])
def test_report_advice_for_a_table_never_talks_of_images(kind: str, input_rate: float) -> None:
    report = report_of("tensors", kind, input_rate)
    assert report.verdict == "input-bound"
    assert image_advice(report.advice) == []
    text = " ".join(report.advice)
    assert "cache() the parsed examples" in text or "parses whole batches" in text


def test_report_advice_for_images_still_talks_of_images() -> None:
    report = report_of("images", "TFRecords", 3000.0, image_encoding="jpeg")
    assert "store raw pixels at training size" in report.advice[1]
    slow = report_of("tensors", "PyDataset", 300.0)
    assert "gathers or parses whole batches" in slow.advice[1]
    assert "yield uint8 batches" in report_of("images", "PyDataset", 300.0).advice[1]


def test_explain_talks_of_images_only_when_there_are_images(
    table_records: str, table: dict[str, np.ndarray], image_folder: Path
) -> None:
    for source in (table_records, tfpipe.from_arrays(table)):
        plan = tfpipe.Pipeline(source, rescale=1 / 255).batch(8).explain()
        assert "image" not in plan and "float32 x" not in plan
    images = tfpipe.Pipeline(tfpipe.from_directory(image_folder), image_size=(8, 8)).explain()
    assert "decode images per example (resize to 8x8, reduced DCT-scale JPEG decode)" in images


def test_benchmark_times_a_table_with_or_without_x_and_y(table_records: str) -> None:
    alone = tfpipe.benchmark(table_records, batches=3, batch_size=16, warmup=1)
    assert alone.examples == 3 * 16
    pairs = tfpipe.benchmark(table_records, batches=3, batch_size=16, warmup=1, x="left", y="price")
    assert pairs.examples == 3 * 16
    with pytest.raises(SchemaError, match=r"feature 'cost' is not in the schema \(y='cost'\)"):
        tfpipe.benchmark(table_records, batches=3, x="left", y="cost")


def test_lists_of_different_lengths_in_arrays_read_as_records_do() -> None:
    source = tfpipe.from_arrays(
        {
            "tokens": [np.asarray(t, np.int64) for t in LISTS],
            "points": [np.full((len(t), 2), i, np.float32) for i, t in enumerate(LISTS)],
            "label": np.arange(len(LISTS)),
        }
    )
    assert source.schema["tokens"] == tfpipe.Tensor(shape=(None,), dtype="int64")
    assert source.schema["points"] == tfpipe.Tensor(shape=(None, 2), dtype="float32")
    ragged = in_order(tfpipe.Pipeline(source))
    assert isinstance(ragged["tokens"], tf.RaggedTensor)
    assert ragged["tokens"].to_list() == LISTS
    padded = in_order(tfpipe.Pipeline(source, pad={"tokens": 6}, pad_value=-1))
    expected = np.array([tokens + [-1] * (6 - len(tokens)) for tokens in LISTS])
    np.testing.assert_array_equal(padded["tokens"].numpy(), expected)


@pytest.mark.fault(
    "rows of one array differ beyond their first dimension",
    reader="from_arrays",
    outcome="SourceError naming the array",
)
def test_rows_that_differ_beyond_their_first_dimension_are_named() -> None:
    with pytest.raises(SourceError, match=r"'points' holds rows of shapes \[\(2,\), \(3,\)\]"):
        tfpipe.from_arrays({"points": [np.zeros((2, 2)), np.zeros((3, 2)), np.zeros((1, 3))]})
    with pytest.raises(SourceError, match=r"'mixed' holds rows of shapes \[\(\), \(2,\)\]"):
        tfpipe.from_arrays({"mixed": [np.zeros((2, 2)), np.zeros((3,))]})
