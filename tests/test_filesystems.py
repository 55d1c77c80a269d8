"""Datasets on any filesystem TensorFlow opens: the whole path on `ram://` (TensorFlow's
in-memory filesystem), the CLI there, unknown schemes named, local paths as before."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe import fs
from tfpipe.cli.parser import main
from tfpipe.errors import DataNotFoundError, EncodeError, SourceError
from tfpipe.format.frames import scan_offsets
from tfpipe.format.metadata import DatasetInfo
from tfpipe.records.writer import ShardWriter

N = 40


def _arrays(n: int = N) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "image": rng.integers(0, 256, (n, 12, 12, 3), dtype=np.uint8),
        "label": np.arange(n) % 3,
        "id": np.arange(n, dtype=np.int64),
    }


@pytest.fixture
def ram() -> Iterator[str]:
    """A fresh folder on `ram://`, removed after the test."""
    root = f"ram://tfpipe-test-{uuid.uuid4().hex[:8]}"
    tf.io.gfile.makedirs(root)
    try:
        yield root
    finally:
        tf.io.gfile.rmtree(root)


@pytest.fixture
def written(ram: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """40 examples (12x12 images, labels, ids) written to 4 shards at `ram://.../out/train`,
    from a working folder that must stay empty (no local `ram:` folder)."""
    monkeypatch.chdir(tmp_path)
    prefix = f"{ram}/out/train"
    tfpipe.write_tfrecords(tfpipe.from_arrays(_arrays()), prefix, num_shards=4, progress=False)
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())
    return prefix


def _ids(dataset: Any) -> list[int]:
    return sorted(int(e["id"]) for e in dataset.as_numpy_iterator())


def test_write_then_read_and_infer_on_ram(written: str) -> None:
    folder = written.rsplit("/", 1)[0]
    assert sorted(tf.io.gfile.listdir(folder)) == [
        *(f"train-0000{k}-of-00004.tfrecord" for k in range(4)),
        "train.json",
    ]
    info = DatasetInfo.load(written)
    assert str(info.directory) == folder and info.num_examples == N
    assert str(info.files[0]) == f"{folder}/train-00000-of-00004.tfrecord"
    dataset = tfpipe.read_tfrecords(written)
    assert len(dataset) == N and _ids(dataset) == list(range(N))
    schema = tfpipe.infer_schema(f"{folder}/train-*")
    assert sorted(schema) == ["id", "image", "label"]
    assert _ids(tfpipe.read_tfrecords(f"{folder}/train-*", schema=schema)) == list(range(N))


def test_pipeline_and_random_access_on_ram(written: str) -> None:
    cache = f"{written.rsplit('/', 1)[0]}/cache/train"
    pipeline = tfpipe.Pipeline(written).cache(cache).shuffle(seed=1).batch(8)
    for _ in range(2):  # the second epoch from the cache files on ram://
        batches = pipeline.build().as_numpy_iterator()
        assert sorted(int(i) for b in batches for i in b["id"]) == list(range(N))
    assert tf.io.gfile.glob(f"{cache}*.index")

    src = tfpipe.from_tfrecords(written)
    in_order = [int(e["id"]) for e in tfpipe.read_tfrecords(written).as_numpy_iterator()]
    assert [int(src[i]["id"]) for i in range(N)] == in_order
    assert src.origin(0) == f"record 0 of {written}-00000-of-00004.tfrecord"
    order = np.random.default_rng(0).permutation(N).tolist()
    with ThreadPoolExecutor(4) as pool:  # a stream per thread: seeks do not interleave
        ids = list(pool.map(lambda i: int(src[i]["id"]), order * 5))
    assert ids == [in_order[i] for i in order] * 5
    index = f"{written.rsplit('/', 1)[0]}/.tfpipe-index"
    assert len(tf.io.gfile.listdir(index)) == 4  # saved beside the shards, on ram://
    again = tfpipe.from_tfrecords(written)  # from the saved index
    assert [str(p) for p in again._index_files] == [
        f"{index}/train-0000{k}-of-00004.tfrecord.idx" for k in range(4)
    ]

    loader = tfpipe.SequenceLoader(again, batch_size=8, x="id", y="label", seed=3)
    for epoch in range(2):
        loader.on_epoch_end()
        ids = np.concatenate([loader[b][0] for b in range(len(loader))]).tolist()
        assert sorted(ids) == list(range(N)), epoch


@pytest.mark.slow
def test_fit_trains_from_ram(written: str) -> None:
    model = keras.Sequential(
        [keras.Input((12, 12, 3)), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = tfpipe.fit(model, written, epochs=2, batch_size=8, report=False, verbose=0)
    assert len(history.history["loss"]) == 2
    assert all(np.isfinite(history.history["loss"]))


def _flip(url: str, position: int) -> None:
    data = bytearray(fs.GPath(url).read_bytes())
    data[position] ^= 0x20
    fs.GPath(url).write_bytes(bytes(data))


@pytest.mark.fault(
    "bit flip in a record's data on ram:// after indexing",
    reader="from_tfrecords",
    outcome="SourceError: CRC fails, naming shard, record, byte offset",
)
def test_flipped_byte_on_ram_fails_the_crc(written: str) -> None:
    src = tfpipe.from_tfrecords(written)
    shard = f"{written}-00001-of-00004.tfrecord"
    start = scan_offsets(fs.GPath(shard), tf.io.gfile.stat(shard).length)[3]
    _flip(shard, start + 30)  # inside the record's data; the file keeps its size
    message = rf"{shard}' is corrupt: record 3 at byte offset {start} .* its data"
    with pytest.raises(SourceError, match=message):
        tfpipe.from_tfrecords(written)[10 + 3]
    assert int(src[10 + 2]["id"]) >= 0  # the records around it still read


class _FailsAt:
    """A source whose example `at` cannot be read (a killed write, as seen by the files)."""

    def __init__(self, at: int) -> None:
        self.inner = tfpipe.from_arrays(_arrays())
        self.schema = self.inner.schema
        self.at = at

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index == self.at:
            raise OSError("disk gone")
        return self.inner[index]


@pytest.mark.fault(
    "write to ram:// interrupted mid-way",
    reader="write_tfrecords, read_tfrecords",
    outcome="no metadata or temporary shard left; DataNotFoundError on read",
)
def test_interrupted_write_on_ram_leaves_no_dataset(ram: str) -> None:
    prefix = f"{ram}/train"
    with pytest.raises(EncodeError, match="disk gone"):
        tfpipe.write_tfrecords(_FailsAt(25), prefix, num_shards=4, shuffle=False, progress=False)
    assert tf.io.gfile.listdir(ram) == []  # shards done so far and the temporary one removed
    with pytest.raises(DataNotFoundError, match="does not exist"):
        tfpipe.read_tfrecords(prefix)


def test_temporary_shards_on_urls_carry_a_writer_token(ram: str, tmp_path: Path) -> None:
    local = ShardWriter(tmp_path / "train", [0, 4], None).temporary_path(0).name
    first, second = (
        ShardWriter(fs.GPath(f"{ram}/train"), [0, 4], None).temporary_path(0).name for _ in range(2)
    )
    assert local == f".train-00000-of-00001.tfrecord.tmp-{os.getpid()}"  # the lock guards it
    assert first != second and first.startswith(".train-00000-of-00001.tfrecord.tmp-")


@pytest.mark.slow
def test_cli_write_inspect_bench_verify_on_ram(
    image_folder: Path, ram: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = f"{ram}/out"
    split = ["--split", "train=0.75,test=0.25", "--image-size", "16x20"]
    assert main(["write", str(image_folder), out, *split]) == 0
    assert "train: 27 examples" in capsys.readouterr().out
    assert {"test.json", "train.json"} <= set(tf.io.gfile.listdir(out))
    assert main(["inspect", out]) == 0
    report = capsys.readouterr().out
    assert "train: 27 examples" in report and "test: 9 examples" in report
    assert "classes of label: circle, square, triangle" in report
    assert main(["bench", f"{out}/train", "--batches", "2", "--batch-size", "4"]) == 0
    assert "examples/s" in capsys.readouterr().out
    assert main(["verify", f"{out}/train"]) == 0
    assert "27 records (metadata: 27)" in capsys.readouterr().out


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((12, 12, 3)), keras.layers.Flatten()])
    model.compile("adam", "mse")
    return model


_CALLS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "write_tfrecords": ("prefix", lambda p: tfpipe.write_tfrecords(_FailsAt(0), p)),
    "read_tfrecords": ("path", tfpipe.read_tfrecords),
    "infer_schema": ("files", tfpipe.infer_schema),
    "from_tfrecords": ("path", tfpipe.from_tfrecords),
    "Pipeline": ("source", tfpipe.Pipeline),
    "verify": ("path", tfpipe.verify),
    "fit": ("data", lambda p: tfpipe.fit(_model(), p)),
    "DatasetInfo.load": ("prefix", DatasetInfo.load),
}


@pytest.mark.fault(
    "path with a scheme TensorFlow cannot open (gz://, s3:// without tensorflow-io)",
    reader=", ".join(_CALLS),
    outcome="DataNotFoundError naming the argument, the scheme and what adds it",
)
@pytest.mark.parametrize("api", list(_CALLS))
def test_unknown_scheme_is_named_before_any_work(api: str) -> None:
    argument, call = _CALLS[api]
    # _FailsAt(0) would raise OSError if the writer read an example before the check
    with pytest.raises(DataNotFoundError) as raised:
        call("gz://bucket/train")
    message = str(raised.value)
    assert message.startswith(f"{argument}='gz://bucket/train': ")
    assert "no filesystem for the scheme 'gz://'" in message
    assert "did you mean 'gs://'?" in message and "registered: file://, gs://, ram://" in message
    with pytest.raises(DataNotFoundError, match="pip install tensorflow-io"):
        call("s3://bucket/train")


@pytest.mark.fault(
    "URL passed through pathlib.Path (gs:/bucket: '//' collapsed)",
    reader="write_tfrecords, read_tfrecords, from_tfrecords, tfpipe write",
    outcome="DataNotFoundError naming the argument and the URL meant; nothing written",
)
def test_url_collapsed_by_pathlib_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, image_folder: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    meant = "the URL 'gs://bucket/train' with a slash lost"
    with pytest.raises(DataNotFoundError, match=f"prefix='gs:/bucket/train' .*{meant}"):
        tfpipe.write_tfrecords(_FailsAt(0), Path("gs://bucket/train"))
    for read in (tfpipe.read_tfrecords, tfpipe.from_tfrecords):
        with pytest.raises(DataNotFoundError, match=meant):
            read(Path("gs://bucket/train"))
    assert main(["write", str(image_folder), "s3:/bucket/out"]) == 2
    assert not any(tmp_path.iterdir())  # no local folder gs: or s3:


@pytest.mark.fault(
    "CLI OUT with a scheme TensorFlow cannot open",
    reader="tfpipe write",
    outcome="one-line error naming OUT and the scheme, exit status 2",
)
def test_cli_unknown_scheme_is_one_line(
    image_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["write", str(image_folder), "hdfs://namenode/out"]) == 2
    err = capsys.readouterr().err
    assert "tfpipe write: error: OUT='hdfs://namenode/out'" in err
    assert "'hdfs://'" in err and "tensorflow-io" in err and "Traceback" not in err


def test_local_path_with_double_slashes_works_as_before(tmp_path: Path) -> None:
    prefix = f"{tmp_path}//sub//train"
    info = tfpipe.write_tfrecords(
        tfpipe.from_arrays(_arrays(8)), prefix, num_shards=2, progress=False
    )
    assert isinstance(info.directory, Path) and info.directory == tmp_path / "sub"
    assert (tmp_path / "sub" / "train.json").is_file()
    assert not (tmp_path / "sub" / ".train.lock").exists()  # the local lock, released
    assert _ids(tfpipe.read_tfrecords(prefix)) == list(range(8))
    assert len(tfpipe.from_tfrecords(tmp_path / "sub" / "train")) == 8


def test_gpath_keeps_the_url() -> None:
    url = fs.path("gs://bucket/data//train.json")
    assert isinstance(url, fs.GPath) and str(url) == "gs://bucket/data//train.json"
    assert url.name == "train.json" and url.suffix == ".json" and url.stem == "train"
    assert str(url.parent) == "gs://bucket/data" and str(url.parent.parent) == "gs://bucket"
    assert str(url.with_name("x")) == "gs://bucket/data/x"
    assert isinstance(fs.path("out//train"), Path)
    assert fs.escape("gs://b/a[1]") == "gs://b/a[[]1]"


def test_a_pipeline_on_ram_resumes_from_a_position(written: str) -> None:
    pipeline = tfpipe.Pipeline(written).shuffle(seed=2).batch(8)
    identity = pipeline.identity()  # file sizes through gfile, not os.path
    assert identity == tfpipe.Pipeline(written).shuffle(seed=2).batch(8).identity()

    def ids(start: tfpipe.Pipeline) -> list[list[int]]:
        return [b["id"].tolist() for b in start.build().as_numpy_iterator()]

    whole = ids(pipeline.start_at(epoch=1))
    assert ids(pipeline.start_at(epoch=1, batch=2)) == whole[2:] and len(whole) > 2
