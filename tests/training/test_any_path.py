"""One resolution, every entry point (issue 39): what `Pipeline` reads, `fit`, `SequenceLoader`,
`read_tfrecords`, `from_tfrecords`, `infer_schema`, `verify` and the CLI read too, and a path
that names nothing gets the same message everywhere."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli import main
from tfpipe.errors import DataNotFoundError, SourceError

SIZE = (16, 16)
COUNT = 24

pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


def _jpeg(seed: int, size: tuple[int, int]) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (*size, 3), np.uint8)
    out = io.BytesIO()
    PILImage.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 plain `tf.train.Example` records in 3 files written by TensorFlow alone (no tfpipe
    metadata, names not tfpipe's): a JPEG of its own size, an int label, a float score and a
    variable-length float list."""
    folder = tmp_path_factory.mktemp("foreign")
    for part in range(3):
        with tf.io.TFRecordWriter(str(folder / f"part{part}.tfrecord")) as writer:
            for k in range(part * 8, part * 8 + 8):
                feature = {
                    "image": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[_jpeg(k, (20 + k % 3, 24))])
                    ),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 3])),
                    "score": tf.train.Feature(float_list=tf.train.FloatList(value=[k / 10])),
                    "boxes": tf.train.Feature(  # a variable-length list: 0 to 3 values
                        float_list=tf.train.FloatList(value=[k / 100] * (k % 4))
                    ),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
    return folder


@pytest.fixture(scope="module")
def written(image_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 36 images of `image_folder` as tfpipe records in 3 shards, prefix `train`."""
    folder = tmp_path_factory.mktemp("written")
    tfpipe.write_tfrecords(
        tfpipe.from_directory(image_folder), folder / "train", num_shards=3, progress=False
    )
    return folder


def tiny_cnn() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Conv2D(2, 3),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3),
        ]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(data: Any, **kwargs: Any) -> keras.callbacks.History:
    return tfpipe.fit(tiny_cnn(), data, batch_size=8, report=False, verbose=0, **kwargs)


def _forms(folder: Path, pattern: str) -> dict[str, Any]:
    """The ways a user names the same files: a glob, a list of files, their folder."""
    files = sorted(str(f) for f in folder.glob(pattern))
    return {"glob": str(folder / pattern), "list": files, "folder": str(folder)}


@pytest.mark.parametrize("form", ["glob", "list", "folder"])
def test_fit_trains_on_plain_tensorflow_records_named_any_way(foreign: Path, form: str) -> None:
    data = _forms(foreign, "*.tfrecord")[form]
    history = _fit(data, x="image", y="label", epochs=2)
    assert len(history.history["loss"]) == 2
    # the schema is inferred as Pipeline infers it: every example, the score kept
    scores = [round(float(e["score"]) * 10) for e in tfpipe.Pipeline(data, image_size=SIZE).build()]
    assert sorted(scores) == list(range(COUNT))


@pytest.mark.fault(
    "a Pipeline of unknown length (records without metadata) given to Keras's model.fit",
    reader="model.fit(Pipeline(...).build()), tfpipe.fit",
    outcome="every epoch ends at the end of the data (was: UnboundLocalError inside Keras)",
)
def test_keras_fit_ends_each_epoch_of_unknown_length(foreign: Path) -> None:
    dataset = (
        tfpipe.Pipeline(str(foreign), image_size=SIZE, rescale=1 / 255)
        .batch(8)
        .as_supervised("image", "label")
        .build()
    )
    assert int(dataset.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    model = tiny_cnn()
    with pytest.warns(UserWarning, match="ran out of data"):  # Keras learns the epoch's end
        history = model.fit(dataset, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    boxes = [
        b
        for batch in tfpipe.Pipeline(str(foreign), image_size=SIZE).batch(8).build()
        for b in batch["boxes"].to_list()
    ]
    assert sorted(len(b) for b in boxes) == sorted(k % 4 for k in range(COUNT))


def test_fit_takes_a_given_schema_for_records_without_metadata(foreign: Path) -> None:
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(None, None, 3)),
            "label": tfpipe.ClassLabel(names=["a", "b", "c"]),
        }
    )
    history = _fit(str(foreign), schema=schema, epochs=1)  # default x and y: the schema's
    assert len(history.history["loss"]) == 1
    with pytest.raises(ValueError, match=r"schema= describes TFRecords named by a path"):
        _fit(tfpipe.Pipeline(str(foreign)).batch(8).as_supervised("image", "label"), schema=schema)


@pytest.mark.parametrize("form", ["glob", "list", "folder"])
def test_tfpipes_own_shards_named_any_way_keep_their_metadata(written: Path, form: str) -> None:
    data = _forms(written, "train-*.tfrecord")[form]
    pipeline = tfpipe.Pipeline(data).batch(8)
    assert pipeline.examples_per_epoch() == 36  # the metadata's count: checked, not guessed
    assert tfpipe.read_tfrecords(data).cardinality() == 36
    assert len(tfpipe.SequenceLoader(data, batch_size=8, image_size=SIZE)) == 5
    history = _fit(data, epochs=1)
    assert len(history.history["loss"]) == 1


def test_a_folder_of_class_folders_reads_as_from_directory_on_every_loader(
    image_folder: Path,
) -> None:
    source = tfpipe.from_directory(image_folder)
    expected = [int(e["label"]) for e in tfpipe.Pipeline(source, image_size=SIZE).build()]
    by_path = tfpipe.Pipeline(str(image_folder), image_size=SIZE).build()
    assert [int(e["label"]) for e in by_path] == expected
    loader = tfpipe.SequenceLoader(image_folder, batch_size=36, image_size=SIZE, shuffle=False)
    assert loader[0][1].tolist() == expected
    history = _fit(str(image_folder), epochs=1)
    assert len(history.history["loss"]) == 1
    with pytest.raises(SourceError, match=r"folder of class folders of images.*from_directory"):
        tfpipe.read_tfrecords(image_folder)


@pytest.mark.fault(
    "a folder holding several tfpipe datasets (train, val) read as one",
    reader="every entry point: Pipeline, fit, read_tfrecords, verify, the CLI",
    outcome="SourceError listing the datasets and split=, never one merged dataset",
)
def test_a_folder_of_several_datasets_is_never_merged(written: Path, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("train", "val"):
        tfpipe.write_tfrecords(
            tfpipe.from_tfrecords(written / "train"), folder / name, num_shards=2, progress=False
        )
    with pytest.raises(SourceError, match=r"holds the tfpipe datasets \['train', 'val'\]"):
        tfpipe.Pipeline(folder)
    assert tfpipe.Pipeline(folder, split="val").examples_per_epoch() == 36


NOTHING: dict[str, Callable[[str], Any]] = {
    "fit": lambda path: _fit(path),
    "Pipeline": tfpipe.Pipeline,
    "SequenceLoader": tfpipe.SequenceLoader,
    "read_tfrecords": tfpipe.read_tfrecords,
    "from_tfrecords": tfpipe.from_tfrecords,
    "infer_schema": tfpipe.infer_schema,
    "verify": tfpipe.verify,
    "locate_fault": tfpipe.locate_fault,
    "benchmark": tfpipe.benchmark,
}


@pytest.mark.fault(
    "a path that names nothing (a typo)",
    reader="every entry point: fit, Pipeline, SequenceLoader, read, verify, the CLI",
    outcome="DataNotFoundError saying what it was tried as, the same on every entry point",
)
@pytest.mark.parametrize("entry", sorted(NOTHING))
def test_a_path_that_names_nothing_gets_one_message_everywhere(written: Path, entry: str) -> None:
    typo = str(written / "trian")
    with pytest.raises(DataNotFoundError) as raised:
        NOTHING[entry](typo)
    message = str(raised.value)
    assert "names no data: it is not a file, a folder" in message
    assert "a dataset prefix (the metadata file" in message and "trian.json" in message
    assert message.endswith(f"did you mean {str(written / 'train')!r}?")  # the near prefix


def test_the_cli_says_the_same_of_a_path_that_names_nothing(
    written: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("inspect", "verify", "bench"):
        assert main([command, str(written / "trian")]) == 2
        assert "names no data: it is not a file, a folder" in capsys.readouterr().err


@pytest.mark.fault(
    "a prefix whose metadata file was lost, its shards left",
    reader="every entry point: fit, Pipeline, read_tfrecords, from_tfrecords, the CLI",
    outcome="DataNotFoundError: an interrupted write? and the glob that reads them anyway",
)
def test_a_prefix_whose_metadata_was_lost_is_refused_with_the_way_to_read_it(
    written: Path, tmp_path: Path
) -> None:
    for shard in written.glob("train-*"):
        (tmp_path / shard.name).write_bytes(shard.read_bytes())
    with pytest.raises(DataNotFoundError, match=r"3 shard file\(s\) .* interrupted") as raised:
        _fit(str(tmp_path / "train"))
    assert "'" + str(tmp_path / "train-*") + "'" in str(raised.value)


@pytest.fixture
def metadata_opens() -> Iterator[Callable[[Path], int]]:
    """Counts the opens of files, by path, from the audit hook's "open" events."""
    opened: list[str] = []
    recording = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if recording[0] and event == "open" and isinstance(args[0], str | Path):
            opened.append(str(args[0]))

    sys.addaudithook(hook)  # never removed: `recording` turns it off
    yield lambda path: opened.count(str(path))
    recording[0] = False


def test_the_metadata_file_is_opened_once_per_call(
    written: Path, metadata_opens: Callable[[Path], int]
) -> None:
    metadata = written / "train.json"
    tfpipe.Pipeline(written / "train", image_size=SIZE).batch(8).build()
    assert metadata_opens(metadata) == 1
    model = tiny_cnn()
    before = metadata_opens(metadata)
    tfpipe.fit(model, str(written / "train"), batch_size=8, report=False, verbose=0)
    assert metadata_opens(metadata) - before == 1


def test_the_cli_writes_records_tfpipe_did_not_write(
    foreign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "train"
    assert main(["write", str(foreign / "*.tfrecord"), str(out), "--no-shuffle"]) == 0
    assert "24 examples" in capsys.readouterr().out
    read = list(tfpipe.read_tfrecords(out))  # now with metadata: counted and checksummed
    assert [round(float(e["score"]) * 10) for e in read] == list(range(COUNT))
    originals = list(tfpipe.read_tfrecords(str(foreign / "*.tfrecord")))
    assert all(
        e["image"].numpy().tobytes() == o["image"].numpy().tobytes()
        for e, o in zip(read, originals, strict=True)
    )


def test_the_writers_take_a_path_as_the_readers_do(
    image_folder: Path, foreign: Path, tmp_path: Path
) -> None:
    by_source = tfpipe.write_tfrecords(
        tfpipe.from_directory(image_folder), tmp_path / "a", num_shards=2, progress=False
    )
    by_path = tfpipe.write_tfrecords(image_folder, tmp_path / "b", num_shards=2, progress=False)
    assert [s.crc32c for s in by_path.shards] == [s.crc32c for s in by_source.shards]
    assert by_path.class_names == by_source.class_names
    rewritten = tfpipe.write_tfrecords(
        [str(f) for f in sorted(foreign.glob("*.tfrecord"))], tmp_path / "c", progress=False
    )
    assert rewritten.num_examples == COUNT and "score" in rewritten.schema
