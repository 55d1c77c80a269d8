"""`tfpipe.DecodedExamples`: the Pipeline's examples by index, for Grain and PyTorch.

The records hold JPEGs and PNGs of 96x96 and an `id` per example, so that every loader's
output can be matched to the Pipeline's example by example, whatever order it comes in.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import DecodeError, SchemaError, SourceError, TfpipeWarning
from tfpipe.features import imaging
from tfpipe.sources.synthetic import make_image_folder
from with_backend import run_with_backend

SIZE = (64, 64)
COUNT = 24
GRAIN_HINT = "Grain is not installed: pip install 'tfpipe[grain]'"
TORCH_HINT = "PyTorch is not installed: pip install 'tfpipe[torch]'"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Records of 24 images of 96x96 in 3 classes, every third a PNG, with an `id` each."""
    work = tmp_path_factory.mktemp("decoded")
    root = make_image_folder(work / "images", num_classes=3, per_class=COUNT // 3, size=(96, 96))
    paths = sorted(root.rglob("*.jpg"))
    for path in paths[::3]:
        PILImage.open(path).save(path.with_suffix(".png"))
        path.unlink()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    frame = pd.DataFrame(
        {
            "image": [str(p) for p in files],
            "label": [p.parent.name for p in files],
            "id": range(len(files)),
        }
    )
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(None, None, 3), encoding="auto"),
            "label": tfpipe.ClassLabel(names=sorted({p.parent.name for p in files})),
            "id": tfpipe.Tensor(shape=(), dtype="int64"),
        }
    )
    source = tfpipe.from_dataframe(frame, schema=schema, label_cols=["label", "id"])
    out = work / "records" / "train"
    tfpipe.write_tfrecords(source, out, num_shards=2, progress=False)
    return out


def _by_id(batches: Iterable[dict[str, Any]]) -> dict[int, dict[str, np.ndarray]]:
    """The examples of batches (dicts of arrays with an `id` each) by id, each id once."""
    found: dict[int, dict[str, np.ndarray]] = {}
    for batch in batches:
        for k, example_id in enumerate(np.asarray(batch["id"]).tolist()):
            assert example_id not in found, f"example {example_id} came twice"
            found[example_id] = {name: np.asarray(value)[k] for name, value in batch.items()}
    return found


def _one_by_one(examples: Any) -> Iterable[dict[str, Any]]:
    """Each example of a view as a batch of one."""
    return ({k: np.asarray(v)[np.newaxis] for k, v in examples[i].items()} for i in range(COUNT))


def _pipeline(prefix: Path, rescale: float | None) -> dict[int, dict[str, np.ndarray]]:
    built = tfpipe.Pipeline(prefix, image_size=SIZE, rescale=rescale).batch(COUNT).build()
    return _by_id({k: v.numpy() for k, v in batch.items()} for batch in built)


def _assert_same(ours: dict[int, dict[str, Any]], theirs: dict[int, dict[str, Any]]) -> None:
    assert sorted(ours) == sorted(theirs) == list(range(COUNT))
    for example_id, example in theirs.items():
        for name, value in example.items():
            mine = np.asarray(ours[example_id][name])
            assert mine.dtype == value.dtype, (example_id, name, mine.dtype, value.dtype)
            assert np.array_equal(mine, value), (example_id, name)


@pytest.mark.parametrize("rescale", [None, 1 / 255], ids=["uint8", "rescaled"])
def test_the_same_examples_and_pixels_as_the_pipeline(prefix: Path, rescale: float | None):
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE, rescale=rescale)
    stored = tfpipe.from_tfrecords(prefix)
    formats = {imaging.sniff_format(stored[i]["image"]) for i in range(len(stored))}
    assert formats == {"jpeg", "png"}  # the records hold both, as written
    assert len(examples) == COUNT
    _assert_same(_by_id(_one_by_one(examples)), _pipeline(prefix, rescale))
    assert examples[0]["image"].dtype == (np.uint8 if rescale is None else np.float32)


def test_a_source_and_a_path_give_the_same_examples(prefix: Path) -> None:
    by_path = tfpipe.DecodedExamples(prefix, image_size=SIZE)
    by_source = tfpipe.DecodedExamples(tfpipe.from_tfrecords(prefix), image_size=SIZE)
    batch = by_source.__getitems__([5, 0, 17])  # a DataLoader's call for one batch
    assert [int(e["id"]) for e in batch] == [int(by_path[i]["id"]) for i in (5, 0, 17)]
    assert np.array_equal(batch[2]["image"], by_path[17]["image"])


def test_x_and_y_give_the_supervised_pairs(prefix: Path) -> None:
    pairs = tfpipe.DecodedExamples(prefix, image_size=SIZE, rescale=1 / 255, x="image", y="label")
    image, label = pairs[3]
    whole = tfpipe.DecodedExamples(prefix, image_size=SIZE, rescale=1 / 255)[3]
    assert np.array_equal(image, whole["image"]) and label == whole["label"]
    (inputs,) = tfpipe.DecodedExamples(prefix, image_size=SIZE, x={"pixels": "image"})[3]
    assert list(inputs) == ["pixels"] and inputs["pixels"].shape == (*SIZE, 3)


def test_wrong_arguments_are_named(prefix: Path) -> None:
    with pytest.raises(SchemaError, match="x: feature 'pixels' is not in the schema"):
        tfpipe.DecodedExamples(prefix, x="pixels", y="label")
    with pytest.raises(ValueError, match="y needs x"):
        tfpipe.DecodedExamples(prefix, y="label")
    with pytest.raises(ValueError, match="image_size must be"):
        tfpipe.DecodedExamples(prefix, image_size=(64,))
    with pytest.raises(ValueError, match="rescale must be a finite number"):
        tfpipe.DecodedExamples(prefix, rescale=-1)
    with pytest.warns(TfpipeWarning, match="image_size=.* is ignored"):
        tfpipe.DecodedExamples(prefix, image_size=SIZE, x="id", y="label")


def test_a_pickled_view_reads_the_same_examples(prefix: Path) -> None:
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE)
    first = examples[7]
    again = pickle.loads(pickle.dumps(examples))
    assert len(pickle.dumps(examples)) < 10_000  # names and offsets, no pixels
    assert np.array_equal(again[7]["image"], first["image"]) and again[7]["id"] == first["id"]


class _Broken:
    """A source of one example whose JPEG ends after its first marker."""

    schema = tfpipe.Schema({"image": tfpipe.Image(), "label": tfpipe.ClassLabel(num_classes=2)})

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"image": b"\xff\xd8\xff" + bytes(64), "label": 0}

    def origin(self, index: int) -> str:
        return f"row {index} of broken.csv"


def test_an_undecodable_image_is_named_with_its_example() -> None:
    with pytest.raises(DecodeError, match=r"image: .* in row 0 of broken\.csv"):
        tfpipe.DecodedExamples(_Broken(), image_size=SIZE)[0]


def _grain() -> Any:
    grain = pytest.importorskip("grain", reason=GRAIN_HINT)
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain's workers read absl flags: outside absl.app, defaults
    return grain


def _torch_data() -> Any:
    pytest.importorskip("torch", reason=TORCH_HINT)
    import torch.utils.data

    return torch.utils.data


def _numpy(batch: dict[str, Any]) -> dict[str, np.ndarray]:
    return {name: np.asarray(value) for name, value in batch.items()}


def test_grain_shuffles_and_batches_every_example_once(prefix: Path) -> None:
    grain = _grain()
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE)
    dataset = grain.MapDataset.source(examples).shuffle(seed=3).batch(5)
    epoch = [_numpy(batch) for batch in dataset]
    assert [len(b["id"]) for b in epoch] == [5, 5, 5, 5, 4]
    assert [int(i) for i in epoch[0]["id"]] != list(range(5))  # shuffled
    _assert_same(_by_id(epoch), _pipeline(prefix, None))


def test_read_batch_stacks_the_examples_it_decodes_together(prefix: Path) -> None:
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE, rescale=1 / 255)
    batch = examples.read_batch([5, 0, 7])
    for name, value in batch.items():
        assert np.array_equal(value, np.stack([examples[i][name] for i in (5, 0, 7)])), name
    pairs = tfpipe.DecodedExamples(prefix, image_size=SIZE, x="image", y=["label", "id"])
    images, (labels, ids) = pairs.read_batch(np.array([3, 4]))
    assert images.shape == (2, *SIZE, 3) and labels.shape == (2,)
    assert ids.tolist() == [int(pairs[3][1][1]), int(pairs[4][1][1])]


def test_read_batch_names_the_feature_whose_sizes_differ(tmp_path: Path) -> None:
    frame = pd.DataFrame({"x": [np.zeros(2, np.float32), np.zeros(3, np.float32)]})
    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(None,), dtype="float32")})
    examples = tfpipe.DecodedExamples(tfpipe.from_dataframe(frame, schema=schema))
    shapes = r"x: examples of different shapes \[\(2,\), \(3,\)\]"
    with pytest.raises(ValueError, match=shapes) as e:
        examples.read_batch([0, 1])
    assert "leave a variable-length feature out of x= and y=" in str(e.value)


def test_grain_batches_of_indices_mapped_by_read_batch_give_every_example_once(
    prefix: Path,
) -> None:
    """The guide's fast Grain pattern: one decode call per batch instead of per example."""
    grain = _grain()
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE)
    dataset = (
        grain.MapDataset.range(len(examples)).shuffle(seed=3).batch(5).map(examples.read_batch)
    )
    epoch = [_numpy(batch) for batch in dataset]
    assert [len(b["id"]) for b in epoch] == [5, 5, 5, 5, 4]
    assert [int(i) for i in epoch[0]["id"]] != list(range(5))  # shuffled
    _assert_same(_by_id(epoch), _pipeline(prefix, None))


@pytest.mark.slow
def test_grain_worker_processes_give_every_example_once_with_the_pipeline_s_pixels(
    prefix: Path,
) -> None:
    """Grain's workers are spawned: each unpickles the view and decodes with TensorFlow."""
    grain = _grain()
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE, rescale=1 / 255)
    dataset = (
        grain.MapDataset.source(examples)
        .shuffle(seed=0)
        .batch(4)
        .to_iter_dataset()
        .mp_prefetch(grain.multiprocessing.MultiprocessingOptions(num_workers=2))
    )
    iterator = iter(dataset)
    try:
        epoch = [_numpy(batch) for batch in iterator]
    finally:
        iterator.close()
    _assert_same(_by_id(epoch), _pipeline(prefix, 1 / 255))


def test_a_dataloader_s_workers_give_every_example_once(prefix: Path) -> None:
    """Forked workers decode with Pillow: the pixels within 1/255 of the Pipeline's."""
    data = _torch_data()
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE)
    loader = data.DataLoader(examples, batch_size=5, shuffle=True, num_workers=2)
    found = _by_id(_numpy(batch) for batch in loader)
    pipeline = _pipeline(prefix, None)
    assert sorted(found) == list(range(COUNT))
    for example_id, example in pipeline.items():
        assert found[example_id]["label"] == example["label"]
        diff = np.abs(found[example_id]["image"].astype(float) - example["image"])
        assert diff.mean() <= 0.5 and diff.max() <= 2, example_id


def test_two_ranks_of_a_distributed_sampler_give_every_example_once(prefix: Path) -> None:
    data = _torch_data()
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE, x="image", y="id")
    seen: list[int] = []
    for rank in (0, 1):
        sampler = data.DistributedSampler(examples, num_replicas=2, rank=rank, seed=0)
        loader = data.DataLoader(examples, batch_size=4, sampler=sampler, num_workers=2)
        ids = [int(i) for _, batch_ids in loader for i in batch_ids]
        assert len(ids) == COUNT // 2
        seen += ids
    assert sorted(seen) == list(range(COUNT))


@pytest.mark.slow
def test_spawned_dataloader_workers_give_the_pipeline_s_pixels(prefix: Path) -> None:
    data = _torch_data()
    examples = tfpipe.DecodedExamples(prefix, image_size=SIZE)
    loader = data.DataLoader(examples, batch_size=6, num_workers=2, multiprocessing_context="spawn")
    _assert_same(_by_id(_numpy(batch) for batch in loader), _pipeline(prefix, None))


def _corrupt_copy(prefix: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the records with one byte of record 2 of the second shard flipped; that
    shard's name."""
    copy = tmp_path / "train"
    for file in prefix.parent.glob(f"{prefix.name}*"):
        (tmp_path / file.name).write_bytes(file.read_bytes())
    source = tfpipe.from_tfrecords(copy)
    shard, local, start, frame = source.frame(source.shard_counts[0] + 2)
    path = source.files[shard]
    data = bytearray(Path(path).read_bytes())
    data[start + len(frame) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    assert local == 2
    return copy, Path(path).name


@pytest.mark.fault(
    "a record whose bytes fail its checksum, read in a worker process",
    reader="DecodedExamples in a DataLoader's workers and Grain's",
    outcome="SourceError naming the file, the record and its byte offset",
)
@pytest.mark.slow
@pytest.mark.parametrize("loader", ["torch", "grain"])
def test_a_corrupt_record_in_a_worker_process_is_named(
    prefix: Path, tmp_path: Path, loader: str
) -> None:
    copy, shard = _corrupt_copy(prefix, tmp_path)
    examples = tfpipe.DecodedExamples(copy, image_size=SIZE)
    if loader == "torch":
        batches: Any = _torch_data().DataLoader(examples, batch_size=4, num_workers=2)
    else:
        grain = _grain()
        options = grain.multiprocessing.MultiprocessingOptions(num_workers=2)
        batches = grain.MapDataset.source(examples).batch(4).to_iter_dataset().mp_prefetch(options)
    message = rf"TFRecord file '.*{shard}' is corrupt: record 2 at byte offset \d+"
    with pytest.raises(SourceError, match=message):
        for _ in batches:
            pass


@pytest.mark.slow
def test_model_fit_trains_on_jax_from_a_grain_dataset(prefix: Path) -> None:
    _grain()
    pytest.importorskip("jax", reason='JAX is not installed: pip install -e ".[dev]"')
    result = run_with_backend(Path(__file__).with_name("grain_fit_run.py"), "jax", str(prefix))
    assert result.returncode == 0, result.stderr[-3000:]
    backend, *losses = result.stdout.split()[-4:]
    assert backend == "jax" and len(losses) == 3
    assert float(losses[-1]) < float(losses[0]), losses
