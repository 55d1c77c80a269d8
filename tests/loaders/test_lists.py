"""Variable-length lists (boxes, class ids, tokens) through every stage of a Pipeline and fit.

The detection records are in the TensorFlow Object Detection API's layout, written by plain
TensorFlow (tests/detection.py): JPEGs of different sizes, decoded to one size, with 0 to 3
boxes each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from detection import LISTS, write_detection_records
from tfpipe.errors import SchemaError, TfpipeWarning

SIZE = (24, 24)
LABEL = "image/object/class/label"
BOX = "image/object/bbox/"


@pytest.fixture(scope="module")
def detection(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """The records' path, and what each example holds (in the order written)."""
    path = tmp_path_factory.mktemp("detection") / "objects.tfrecord"
    return str(path), write_detection_records(path)


def pipeline(path: str, **kwargs: Any) -> tfpipe.Pipeline:
    """The Pipeline of the detection records (infer_schema leaves out the class names: a list
    of strings)."""
    with pytest.warns(TfpipeWarning, match="image/object/class/text"):
        return tfpipe.Pipeline(path, image_size=SIZE, **kwargs)


def examples(dataset: tf.data.Dataset) -> list[dict[str, Any]]:
    """Every example of a dataset of batches, its lists as numpy arrays of their length."""
    out = []
    for batch in dataset:
        for name, value in batch.items():
            assert not isinstance(value, tf.RaggedTensor) or name in (*LISTS, "boxes"), name
        size = int(batch["image/filename"].shape[0])
        for i in range(size):
            out.append({name: value[i].numpy() for name, value in batch.items()})
    return out


def boxes_of(example: dict[str, Any]) -> np.ndarray:
    keys = ("ymin", "xmin", "ymax", "xmax")
    return np.stack([example[BOX + key] for key in keys], axis=-1).reshape(-1, 4)


def check_every_object(got: list[dict[str, Any]], written: list[dict[str, Any]]) -> None:
    """Every example's boxes and classes exactly as written, each example once."""
    by_name = {example["filename"]: example for example in written}
    assert sorted(e["image/filename"].decode() for e in got) == sorted(by_name)
    for example in got:
        expected = by_name[example["image/filename"].decode()]
        np.testing.assert_array_equal(boxes_of(example), expected["boxes"])
        assert example[LABEL].tolist() == expected["labels"]
        assert example["image/height"] == expected["height"]
        assert example["image/encoded"].shape == (*SIZE, 3)


def test_lists_stay_ragged_through_the_image_decode(detection: tuple[str, Any]) -> None:
    path, written = detection
    batches = pipeline(path).batch(3).build()
    spec = batches.element_spec
    for name in LISTS:
        assert isinstance(spec[name], tf.RaggedTensorSpec), name
    assert spec["image/encoded"].shape.as_list() == [None, *SIZE, 3]
    got = examples(batches)
    check_every_object(got, written)
    assert [e["image/filename"].decode() for e in got] == [w["filename"] for w in written]
    assert "as RaggedTensors" in pipeline(path).batch(3).explain()


def test_pad_gives_dense_lists_of_every_object(detection: tuple[str, Any]) -> None:
    path, written = detection
    padded = pipeline(path, pad=dict.fromkeys(LISTS, 3), pad_value=-1).batch(4).build()
    for batch in padded:
        assert all(batch[name].shape.as_list()[1:] == [3] for name in LISTS)
    got = examples(padded)
    for example, expected in zip(got, written, strict=True):
        count = len(expected["labels"])
        assert example[LABEL].tolist() == expected["labels"] + [-1] * (3 - count)
        np.testing.assert_array_equal(boxes_of(example)[:count], expected["boxes"])
        assert (boxes_of(example)[count:] == -1).all()


def _keep(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    return example


STAGES = {
    "map": lambda p: p.map(_keep),
    "filter": lambda p: p.filter(lambda e: tf.size(e[LABEL]) >= 0),
    "shuffle": lambda p: p.shuffle(seed=1),
    "cache": lambda p: p.cache(),
    "cache, shuffle, map": lambda p: p.cache().shuffle(seed=2).map(_keep),
    "repeat": lambda p: p.repeat(2),
}


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_keeps_every_object(detection: tuple[str, Any], stage: str) -> None:
    path, written = detection
    got = examples(STAGES[stage](pipeline(path)).batch(2).build())
    times = 2 if stage == "repeat" else 1
    check_every_object(got[: len(written)], written)
    assert len(got) == times * len(written)


def test_a_filter_on_the_lists_keeps_the_examples_with_objects(detection: tuple[str, Any]) -> None:
    path, written = detection
    kept = pipeline(path).filter(lambda e: tf.size(e[LABEL]) > 0).batch(2).build()
    check_every_object(examples(kept), [w for w in written if w["labels"]])


def test_joint_augment_moves_stacked_boxes(detection: tuple[str, Any]) -> None:
    path, written = detection

    def stack(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        boxes = tf.stack([example[BOX + k] for k in ("ymin", "xmin", "ymax", "xmax")], axis=-1)
        return {"image": example["image/encoded"], "boxes": boxes, "n": tf.size(example[LABEL])}

    joint = tfpipe.augment.Joint(images="image", boxes="boxes", flip="horizontal", seed=0)
    batches = pipeline(path).map(stack).map(joint).batch(3).build()
    assert batches.element_spec["boxes"].shape.as_list() == [None, None, 4]
    got = [box for batch in batches for box in batch["boxes"].to_list()]
    flips = 0
    for boxes, expected in zip(got, written, strict=True):
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        flipped = expected["boxes"][:, [0, 3, 2, 1]] * [1, -1, 1, -1] + [0, 1, 0, 1]
        same = np.allclose(boxes, expected["boxes"])
        assert same or np.allclose(boxes, flipped)
        flips += not same
    assert 0 < flips < len([w for w in written if w["labels"]])


def test_as_supervised_with_and_without_the_lists(detection: tuple[str, Any]) -> None:
    path, written = detection
    pairs = pipeline(path).batch(3).as_supervised("image/encoded", "image/height").build()
    heights = [int(h) for _, y in pairs for h in y]
    assert heights == [w["height"] for w in written]
    pairs = pipeline(path).batch(3).as_supervised("image/encoded", LABEL).build()
    labels = [row for _, y in pairs for row in y.to_list()]
    assert labels == [w["labels"] for w in written]


def test_start_at_replays_the_lists_of_an_epoch(detection: tuple[str, Any]) -> None:
    path, _ = detection
    base = pipeline(path).shuffle(seed=3).batch(2)
    whole = [b[LABEL].to_list() for b in base.start_at(epoch=1).repeat(2).build()]
    rest = [b[LABEL].to_list() for b in base.start_at(epoch=1, batch=2).repeat(2).build()]
    assert rest == whole[2:]
    assert len(whole) == 4


def test_tfpipe_records_of_lists_and_images(tmp_path: Path) -> None:
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(None, None, 3)),
            "tokens": tfpipe.Tensor(shape=(None,), dtype="int64"),
            "points": tfpipe.Tensor(shape=(None, 2), dtype="float32"),
        }
    )
    tokens = [[1, 2, 3], [], [4], [5, 6]]
    rows = {
        "image": [np.full((8 + i, 10, 3), i, np.uint8) for i in range(4)],
        "tokens": tokens,
        "points": [np.full((len(t), 2), i, np.float32) for i, t in enumerate(tokens)],
    }
    source = tfpipe.from_arrays({k: np.array(v, dtype=object) for k, v in rows.items()}, schema)
    prefix = str(tmp_path / "lists")
    tfpipe.write_tfrecords(source, prefix, num_shards=1, shuffle=False)
    (batch,) = tfpipe.Pipeline(prefix, image_size=(6, 6)).map(_keep).batch(4).build()
    assert batch["tokens"].to_list() == tokens
    assert batch["points"].shape.as_list() == [4, None, 2]
    assert [len(p) for p in batch["points"].to_list()] == [3, 0, 1, 2]


def test_lists_on_the_tf_data_service(detection: tuple[str, Any], service: str) -> None:
    path, written = detection
    distributed = pipeline(path).map(_keep).batch(2).distribute(service).build()
    check_every_object(examples(distributed), written)


@pytest.mark.fault(
    "a map's value of different shapes in one batch (not a list)",
    reader="Pipeline.map + batch",
    outcome="error naming the feature and the shapes received, never TensorFlow's batch error",
)
def test_values_of_different_shapes_are_named(detection: tuple[str, Any]) -> None:
    path, _ = detection

    def square(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        n = tf.size(example[LABEL])
        return {"grid": tf.zeros([n, n]), "name": example["image/filename"]}

    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"grid: values of different shapes in one batch.*Received lengths.*\[2 0 3 1 3 2 1\]",
    ):
        list(pipeline(path).map(square).batch(7).build())
    same = pipeline(path).map(lambda e: {"grid": tf.zeros([2, tf.size(e[LABEL]) * 0 + 2])})
    (batch,) = same.batch(7).build()
    assert not isinstance(batch["grid"], tf.RaggedTensor)
    assert batch["grid"].shape == (7, 2, 2)


def _image_model() -> keras.Model:
    model = keras.Sequential(
        [keras.Input((*SIZE, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(),
         keras.layers.Dense(1)]
    )  # fmt: skip
    model.compile("sgd", "mse")
    return model


def test_fit_trains_a_model_not_taking_the_lists(detection: tuple[str, Any]) -> None:
    path, _ = detection
    data = pipeline(path).shuffle(seed=0).batch(4).as_supervised("image/encoded", "image/height")
    history = tfpipe.fit(_image_model(), data, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.fault(
    "a list as the target of tfpipe.fit",
    reader="tfpipe.training.fit",
    outcome="SchemaError naming the feature and pad=, before training",
)
def test_fit_refuses_a_list_as_target_naming_pad(detection: tuple[str, Any]) -> None:
    path, _ = detection
    data = pipeline(path).batch(4)
    with pytest.raises(SchemaError, match=rf"feature '{LABEL}' is a list.*pad=.*Received: y="):
        tfpipe.fit(_image_model(), data, x="image/encoded", y=LABEL, report=False, verbose=0)


@pytest.mark.fault(
    "a list as the input of a model declaring a dense input",
    reader="tfpipe.training.fit",
    outcome="SchemaError naming the feature, pad= and keras.Input(ragged=True), before training",
)
def test_fit_takes_a_list_padded_or_into_a_ragged_input(detection: tuple[str, Any]) -> None:
    path, _ = detection
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    dense.compile("sgd", "mse")
    lists = pipeline(path).batch(4).as_supervised(LABEL, "image/height")
    with pytest.raises(SchemaError, match=rf"'{LABEL}'.*pad=.*ragged=True.*Received: x="):
        tfpipe.fit(dense, lists, report=False, verbose=0)
    padded = pipeline(path, pad={LABEL: 3}).batch(4).as_supervised(LABEL, "image/height")
    history = tfpipe.fit(dense, padded, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    ragged = keras.Input((None,), dtype="int64", ragged=True)
    count = keras.layers.Lambda(
        lambda t: tf.cast(t.row_lengths()[:, None], "float32"), output_shape=(1,)
    )(ragged)
    counting = keras.Model(ragged, keras.layers.Dense(1)(count))
    counting.compile("sgd", "mse")
    history = tfpipe.fit(counting, lists, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def detection_source(path: str) -> Any:
    """`from_tfrecords` of the detection records, with the schema `infer_schema` gives."""
    with pytest.warns(TfpipeWarning, match="image/object/class/text"):
        schema = tfpipe.infer_schema(path)
    return tfpipe.from_tfrecords(path, schema=schema)


@pytest.mark.fault(
    "a list selected by SequenceLoader and not in pad=",
    reader="SequenceLoader",
    outcome="SchemaError naming the feature and pad=",
)
def test_sequence_loader_refuses_a_list_naming_the_fix(detection: tuple[str, Any]) -> None:
    source = detection_source(detection[0])
    with pytest.raises(SchemaError, match=rf"'{LABEL}' is a list.*pad=\{{'{LABEL}': length\}}"):
        tfpipe.SequenceLoader(source, x="image/encoded", y=LABEL, image_size=SIZE)
    with pytest.raises(SchemaError, match=rf"'{LABEL}' is a list.*pad="):
        tfpipe.SequenceLoader(source, x=[BOX + "ymin", LABEL], pad={BOX + "ymin": 3}, y=None)


def test_sequence_loader_pads_every_object_as_the_pipeline_does(
    detection: tuple[str, Any],
) -> None:
    path, written = detection
    pad = dict.fromkeys(LISTS, 3)
    loader = tfpipe.SequenceLoader(
        detection_source(path), batch_size=4, x=["image/encoded", *LISTS], y="image/height",
        image_size=SIZE, rescale=None, dtype="uint8", shuffle=False, pad=pad, pad_value=-1,
    )  # fmt: skip
    got = []
    for index in range(len(loader)):
        (image, *lists), height = loader[index]
        assert image.shape == (len(height), *SIZE, 3)
        assert all(values.shape == (len(height), 3) for values in lists)
        assert [values.dtype for values in lists] == [np.float32] * 4 + [np.int64]
        got += [dict(zip(LISTS, values, strict=True)) for values in zip(*lists, strict=True)]
    expected = examples(pipeline(path, pad=pad, pad_value=-1).batch(4).build())
    assert len(got) == len(expected) == len(written)
    for mine, theirs, example in zip(got, expected, written, strict=True):
        for name in LISTS:
            np.testing.assert_array_equal(mine[name], theirs[name])
        assert mine[LABEL].tolist() == example["labels"] + [-1] * (3 - len(example["labels"]))


def _box_count_model() -> keras.Model:
    """A model of an image and its padded class ids (3 of them)."""
    image = keras.Input((*SIZE, 3))
    labels = keras.Input((3,))
    flat = keras.layers.Flatten()(keras.layers.Rescaling(1 / 255)(image))
    joined = keras.layers.Concatenate()([flat, labels])
    model = keras.Model([image, labels], keras.layers.Dense(1)(joined))
    model.compile("sgd", "mse")
    return model


def test_sequence_loader_trains_with_a_padded_list_as_an_input(
    detection: tuple[str, Any],
) -> None:
    source = detection_source(detection[0])
    loader = tfpipe.SequenceLoader(
        source, batch_size=4, x=["image/encoded", LABEL], y="image/height", image_size=SIZE,
        rescale=None, pad={LABEL: 3}, seed=0,
    )  # fmt: skip
    history = _box_count_model().fit(loader, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and len(history.history["loss"]) == 2
    with pytest.warns(TfpipeWarning, match=rf"pad is ignored for \['{LABEL}'\]: x and y"):
        unselected = tfpipe.SequenceLoader(
            source, batch_size=4, x="image/encoded", y="image/height", image_size=SIZE,
            rescale=None, pad={LABEL: 3}, seed=0,
        )  # fmt: skip
    history = _image_model().fit(unselected, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
