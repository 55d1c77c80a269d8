"""tfpipe.Pipeline: plan order, shuffling, sharding, caching, sources and errors."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DataNotFoundError, SchemaError, SourceError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo

NUM = 24


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "image": rng.integers(0, 256, (NUM, 8, 8, 3), dtype=np.uint8),
        "label": np.arange(NUM) % 3,
        "id": np.arange(NUM),
    }


@pytest.fixture(scope="module")
def arrays_source() -> tfpipe.sources.ArraySource:
    return tfpipe.from_arrays(_arrays())


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory, arrays_source) -> str:
    """NUM raw-image examples with an `id`, in order, in 4 shards."""
    prefix = tmp_path_factory.mktemp("records") / "train"
    tfpipe.write_tfrecords(arrays_source, prefix, num_shards=4, shuffle=False, progress=False)
    return str(prefix)


def _ids(dataset: tf.data.Dataset) -> list[int]:
    return [int(i) for batch in dataset for i in np.atleast_1d(batch["id"].numpy())]


def _examples(dataset: tf.data.Dataset, *names: str) -> list[tuple]:
    """The examples of a batched dataset as sorted tuples of bytes, order-independent."""
    rows = []
    for batch in dataset:
        parts = batch if isinstance(batch, tuple) else tuple(batch[n] for n in names)
        for i in range(int(parts[0].shape[0])):
            rows.append(tuple(np.asarray(p[i]).tobytes() for p in parts))
    return sorted(rows)


def test_seeded_order_is_reproducible_and_reshuffled_each_epoch(records):
    pipeline = tfpipe.Pipeline(records).shuffle(seed=3).batch(5)
    first = pipeline.build()
    epoch1, epoch2 = _ids(first), _ids(first)
    assert sorted(epoch1) == sorted(epoch2) == list(range(NUM))
    assert epoch1 != epoch2
    assert _ids(pipeline.build()) == epoch1
    assert _ids(tfpipe.Pipeline(records).shuffle(seed=4).batch(5).build()) != epoch1


ORDERS = """
import numpy as np, tfpipe
def ids(pipeline):
    dataset = pipeline.batch(5).build()
    return [[int(i) for batch in dataset for i in batch["id"]] for _epoch in range(2)]
cached = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(24)})).cache()
print(ids(tfpipe.Pipeline(RECORDS).shuffle(seed=3)), ids(cached.shuffle(seed=3, buffer_size=4)))
"""


@pytest.fixture(scope="module")
def fresh_orders(records) -> str:
    """The seeded orders of ORDERS in a process of its own, where no global seed was ever set
    (one process for the module: they do not depend on the test)."""
    script = ORDERS.replace("RECORDS", repr(records))
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()[-1]


@pytest.mark.fault(
    "a global seed set before a seeded shuffle (tf.random.set_seed, keras.utils.set_random_seed)",
    reader="Pipeline.shuffle(seed=...)",
    outcome="the orders of a process without it: files, records, cached batches and examples",
)
@pytest.mark.parametrize("set_seed", [tf.random.set_seed, keras.utils.set_random_seed])
def test_a_global_seed_does_not_change_a_seeded_order(
    records, fresh_orders, set_seed, global_seeds
):
    script = ORDERS.replace("RECORDS", repr(records))
    set_seed(123)
    with contextlib.redirect_stdout(io.StringIO()) as here:
        exec(script, {})
    assert here.getvalue().splitlines()[-1] == fresh_orders


def test_unseeded_shuffle_is_not_deterministic_but_complete(records):
    pipeline = tfpipe.Pipeline(records).shuffle().batch(7)
    assert "deterministic=False" in pipeline.explain()
    assert sorted(_ids(pipeline.build())) == list(range(NUM))


@pytest.mark.parametrize("kind", ["arrays", "dataframe", "one shard", "four shards"])
def test_unshuffled_order_is_the_source_order_in_every_build(
    kind, arrays_source, records, image_folder, image_dataframe, tmp_path
):
    """Parallel reads, parses, decodes and maps yield in order without a shuffle: predictions
    line up with the rows (deterministic=False reordered 3 to 8 builds in 10)."""
    if kind == "dataframe":
        frame = image_dataframe.assign(id=np.arange(len(image_dataframe)))
        schema = tfpipe.Schema(
            {"image": tfpipe.Image(), "id": tfpipe.Tensor(shape=(), dtype="int64")}
        )
        source = tfpipe.from_dataframe(frame, base_dir=image_folder, schema=schema)
        expected = list(range(len(frame)))
    elif kind == "one shard":
        source = str(tmp_path / "train")
        tfpipe.write_tfrecords(arrays_source, source, num_shards=1, shuffle=False, progress=False)
        expected = list(range(NUM))
    else:
        source = arrays_source if kind == "arrays" else records
        # Four shards: one record of each in turn, the same order in every build.
        expected = (
            list(range(NUM))
            if kind == "arrays"
            else _ids(tfpipe.Pipeline(records).batch(NUM).build())
        )
    pipeline = tfpipe.Pipeline(source, image_size=(16, 16)).map(lambda ex: ex).batch(5)
    assert "deterministic=True" in pipeline.explain()
    for _ in range(6):
        dataset = pipeline.build()
        assert [_ids(dataset), _ids(dataset)] == [expected, expected]


@pytest.mark.parametrize("num", [2, 3, 6])
def test_shards_see_every_example_exactly_once(records, num):
    parts = [
        _ids(tfpipe.Pipeline(records).shard(num, i).shuffle(seed=i).batch(4).build())
        for i in range(num)
    ]
    assert sorted(i for part in parts for i in part) == list(range(NUM))
    by = "files" if num <= 4 else "records"
    assert f"shard {by} 0 of {num}" in tfpipe.Pipeline(records).shard(num, 0).explain()


def test_repeat_gives_whole_epochs(records):
    ids = _ids(tfpipe.Pipeline(records).shuffle(seed=0).repeat(2).batch(6).build())
    assert sorted(ids) == sorted(list(range(NUM)) * 2)


def _stages(pipeline: tfpipe.Pipeline) -> list[str]:
    return [line.split(". ", 1)[1] for line in pipeline.explain().splitlines()]


def test_explain_shows_the_optimal_order_whatever_the_call_order(records):
    def scale(example):
        return {**example, "image": example["image"] // 2}

    base = tfpipe.Pipeline(records)
    one = base.shuffle(seed=0).map(scale).batch(8).prefetch().as_supervised("image", "label")
    two = base.prefetch().as_supervised("image", "label").batch(8).map(scale).shuffle(seed=0)
    assert one.explain() == two.explain()
    stages = _stages(one)
    order = [
        "shuffle file list",
        "interleave",
        "shuffle records",
        "batch 8 records",
        "parse_example",
        "unbatch",
        r"map\(scale\)",
        "batch 8$",
        "as_supervised",
        "prefetch",
    ]
    positions = [next(i for i, s in enumerate(stages) if re.match(o, s)) for o in order]
    assert positions == sorted(positions)
    assert stages[-2] == "prefetch AUTOTUNE"


def test_without_maps_the_records_are_batched_once_at_the_requested_size(records):
    stages = _stages(tfpipe.Pipeline(records).batch(5, drop_remainder=True))
    assert stages.count("batch 5 records (drop remainder)") == 1
    assert not any("unbatch" in s for s in stages)
    batches = list(tfpipe.Pipeline(records).batch(5, drop_remainder=True).build())
    assert [int(b["id"].shape[0]) for b in batches] == [5] * (NUM // 5)


def flip(example):
    return {**example, "image": tf.image.random_flip_left_right(example["image"])}


def halve(example):
    return {**example, "image": example["image"] // 2}


def test_cache_goes_after_deterministic_maps_and_before_random_ones(records):
    stages = _stages(tfpipe.Pipeline(records).map(halve).cache().map(flip).batch(4))
    assert stages.index("cache (memory)") > stages.index("map(halve) (parallel, AUTOTUNE)")
    assert stages.index("cache (memory)") < stages.index("map(flip) (parallel, AUTOTUNE)")


def test_cache_after_a_random_map_warns_and_moves_before_it(records):
    pipeline = tfpipe.Pipeline(records).map(flip).cache().batch(4)
    with pytest.warns(TfpipeWarning, match=r"random map\(flip\)"):
        stages = _stages(pipeline)
    assert stages.index("cache (memory)") < stages.index("map(flip) (parallel, AUTOTUNE)")


def test_random_flag_overrides_detection(records):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stages = _stages(tfpipe.Pipeline(records).map(flip, random=False).cache())
    assert stages.index("cache (memory)") > stages.index("map(flip) (parallel, AUTOTUNE)")
    with pytest.warns(TfpipeWarning):
        tfpipe.Pipeline(records).map(halve, random=True).cache().explain()


def test_cached_pipeline_reshuffles_and_is_complete_each_epoch(records, tmp_path):
    pipeline = tfpipe.Pipeline(records).take(20).cache(tmp_path / "c").shuffle(seed=1).batch(3)
    stages = _stages(pipeline)
    assert stages.index("take 20 examples") < stages.index(f"cache ({tmp_path / 'c'})")
    dataset = pipeline.build()
    epoch1, epoch2 = _ids(dataset), _ids(dataset)
    assert sorted(epoch1) == sorted(epoch2)
    assert len(set(epoch1)) == 20 and epoch1 != epoch2


def test_directory_and_dataframe_give_the_tfrecord_examples(
    image_folder, image_dataframe, tmp_path
):
    folder = tfpipe.from_directory(image_folder)
    frame = tfpipe.from_dataframe(image_dataframe, base_dir=image_folder, schema=folder.schema)
    prefix = tmp_path / "folder"
    tfpipe.write_tfrecords(folder, prefix, num_shards=2, progress=False)
    expected = _examples(
        tfpipe.Pipeline(str(prefix), image_size=(24, 24)).batch(8).build(), "image", "label"
    )
    assert len(expected) == len(folder)
    for source in (folder, frame):
        got = tfpipe.Pipeline(source, image_size=(24, 24)).shuffle(seed=0).batch(8).build()
        assert _examples(got, "image", "label") == expected


class _Batches(keras.utils.PyDataset):
    def __init__(self, arrays: dict[str, np.ndarray], size: int) -> None:
        super().__init__()
        self.arrays, self.size = arrays, size

    def __len__(self) -> int:
        return -(-NUM // self.size)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        part = slice(index * self.size, (index + 1) * self.size)
        return {name: array[part] for name, array in self.arrays.items()}


def test_arrays_and_pydataset_give_the_tfrecord_examples(records, arrays_source):
    expected = _examples(tfpipe.Pipeline(records).batch(5).build(), "image", "label", "id")
    for source in (arrays_source, _Batches(_arrays(), 5)):
        got = tfpipe.Pipeline(source).shuffle(seed=2).batch(5).build()
        assert _examples(got, "image", "label", "id") == expected


def test_schema_of_what_the_pipeline_reads(records, arrays_source):
    assert tfpipe.Pipeline(records).schema == DatasetInfo.load(records).schema
    assert tfpipe.Pipeline(arrays_source).schema is arrays_source.schema
    assert tfpipe.Pipeline(_Batches(_arrays(), 5)).schema is None


def test_pydataset_shuffles_and_shards(arrays_source):
    pipeline = tfpipe.Pipeline(_Batches(_arrays(), 4)).shuffle(seed=0).batch(6)
    ids = _ids(pipeline.build())
    assert sorted(ids) == list(range(NUM)) and ids != list(range(NUM))
    halves = [_ids(tfpipe.Pipeline(_Batches(_arrays(), 4)).shard(2, i).build()) for i in (0, 1)]
    assert sorted(halves[0] + halves[1]) == list(range(NUM))


def test_multi_output_from_a_dataframe(image_folder, image_dataframe):
    df = image_dataframe.assign(
        weather=["clear", "haze"] * (len(image_dataframe) // 2),
        ground=[[0, 2], [1]] * (len(image_dataframe) // 2),
    )
    source = tfpipe.from_dataframe(
        df, label_cols=["label", "weather", "ground"], base_dir=image_folder
    )
    dataset = (
        tfpipe.Pipeline(source, image_size=(16, 16), rescale=1 / 255)
        .batch(4)
        .as_supervised("image", ["weather", "ground"])
        .build()
    )
    x, (weather, ground) = next(iter(dataset))
    assert x.shape == (4, 16, 16, 3) and x.dtype == tf.float32
    assert float(tf.reduce_max(x)) <= 1.0
    assert weather.numpy().tolist() == [0, 1, 0, 1]
    assert ground.numpy().tolist()[:2] == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]


def test_gzip_shards(arrays_source, tmp_path):
    prefix = tmp_path / "gz"
    tfpipe.write_tfrecords(arrays_source, prefix, num_shards=2, compression="gzip", progress=False)
    assert "(gzip)" in tfpipe.Pipeline(str(prefix)).explain()
    files = sorted(str(f) for f in tmp_path.glob("gz-*.tfrecord.gz"))
    for pipeline in (
        tfpipe.Pipeline(str(prefix)),
        tfpipe.Pipeline(files, schema=arrays_source.schema),
    ):
        assert sorted(_ids(pipeline.batch(5).build())) == list(range(NUM))


def test_files_without_metadata_take_a_schema(records, arrays_source):
    files = sorted(str(f) for f in Path(records).parent.glob("train-*.tfrecord"))
    pipeline = tfpipe.Pipeline(files, schema=arrays_source.schema).batch(5)
    assert sorted(_ids(pipeline.build())) == list(range(NUM))


def test_missing_and_empty_paths_are_clear_errors(tmp_path):
    with pytest.raises(DataNotFoundError, match="nothing"):
        tfpipe.Pipeline(str(tmp_path / "nothing"))
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(SourceError, match=r"empty\.tfrecord.*is empty"):
        tfpipe.Pipeline(str(empty), schema=tfpipe.Schema({"id": tfpipe.Tensor()}))
    with pytest.raises(ValueError, match="list of TFRecord files is empty"):
        tfpipe.Pipeline([])
    with pytest.raises(SourceError, match="Received: dict"):
        tfpipe.Pipeline({"id": [1, 2]})


def test_unknown_feature_names_are_clear_errors(records):
    with pytest.raises(SchemaError, match="as_supervised: feature 'labels'"):
        tfpipe.Pipeline(records).as_supervised("image", "labels")
    later = tfpipe.Pipeline(records).map(halve).as_supervised("img", "label")
    with pytest.raises(SchemaError, match="as_supervised: feature 'img' is not in"):
        later.build()


def test_a_map_returning_the_wrong_structure_is_a_clear_error(records):
    def pair(example):
        return example["image"], example["label"]

    with pytest.raises(SchemaError, match=r"map\(pair\) must return a dict"):
        tfpipe.Pipeline(records).map(pair).build()
    with pytest.raises(SchemaError, match=r"filter\(<lambda>\) must return a scalar bool"):
        tfpipe.Pipeline(records).filter(lambda ex: ex["label"]).build()


def test_filter_keeps_matching_examples(records):
    ids = _ids(tfpipe.Pipeline(records).filter(lambda ex: ex["label"] == 1).batch(4).build())
    assert sorted(ids) == [i for i in range(NUM) if i % 3 == 1]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: p.batch(0), "batch_size must be a positive int"),
        (lambda p: p.shuffle(seed=-1), "seed must be a non-negative int"),
        (lambda p: p.shard(2, 2), r"index must be an int in \[0, 2\)"),
        (lambda p: p.take(0), "count must be a positive int"),
        (lambda p: p.options(threads=0), "threads must be a positive int"),
        (lambda p: p.options(deterministic="yes"), "deterministic must be"),
        (lambda p: p.map("not a function"), r"map\(\) needs a function"),
        (lambda p: p.as_supervised("image"), "as_supervised: y must be"),
        (lambda p: p.cache("/no/such/folder/c"), "folder '/no/such/folder' is missing"),
    ],
)
def test_bad_options_name_the_argument(records, call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(tfpipe.Pipeline(records))


@pytest.mark.fault(
    "bool, NaN, inf, 0 or negative numeric argument",
    reader="Pipeline",
    outcome="ValueError naming the argument and the value",
)
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda r: tfpipe.Pipeline(r, rescale=True), r"rescale must be a finite number > 0 or No"),
        (lambda r: tfpipe.Pipeline(r, rescale=float("nan")), r"Received: rescale=nan"),
        (lambda r: tfpipe.Pipeline(r, rescale=float("inf")), r"Received: rescale=inf"),
        (lambda r: tfpipe.Pipeline(r, rescale=0), r"Received: rescale=0"),
        (lambda r: tfpipe.Pipeline(r, rescale=-1 / 255), r"Received: rescale=-0\.0039"),
        (lambda r: tfpipe.Pipeline(r, image_size=(True, 4)), r"image_size=\(True, 4\)"),
        (lambda r: tfpipe.Pipeline(r).batch(True), r"Received: batch_size=True"),
        (lambda r: tfpipe.Pipeline(r).batch(8.0), r"Received: batch_size=8\.0"),
        (lambda r: tfpipe.Pipeline(r).shuffle(buffer_size=float("nan")), r"buffer_size=nan"),
        (lambda r: tfpipe.Pipeline(r).shuffle(seed=True), r"Received: seed=True"),
        (lambda r: tfpipe.Pipeline(r).prefetch(0), r"Received: buffer_size=0"),
        (lambda r: tfpipe.Pipeline(r).repeat(0), r"Received: count=0"),
        (lambda r: tfpipe.Pipeline(r).shard(2, True), r"Received: index=True"),
        (lambda r: tfpipe.Pipeline(r).options(ram_budget_mb=-5), r"ram_budget_mb=-5"),
    ],
)
def test_numeric_arguments_refuse_bools_nan_inf_and_non_positive(records, make, message):
    with pytest.raises(ValueError, match=message):
        make(records)


def test_numpy_ints_are_accepted(records):
    pipeline = tfpipe.Pipeline(records, image_size=(np.int64(8), 8), rescale=np.float32(0.5))
    assert pipeline.batch(np.int64(4)).batch_size == 4


def test_variable_size_images_need_image_size(image_folder):
    with pytest.raises(SchemaError, match="pass image_size="):
        tfpipe.Pipeline(tfpipe.from_directory(image_folder)).build()
    with pytest.raises(ValueError, match="image_size must be"):
        tfpipe.Pipeline(tfpipe.from_directory(image_folder), image_size=(0, 4))


def test_reduced_decode_is_close_to_a_full_decode(image_folder):
    source = tfpipe.from_directory(image_folder)
    full, reduced = (
        next(iter(tfpipe.Pipeline(source, image_size=(12, 12), reduced_decode=r).batch(36).build()))
        for r in (False, True)
    )
    assert (
        "reduced DCT-scale"
        in tfpipe.Pipeline(source, image_size=(12, 12), reduced_decode=True).explain()
    )
    difference = np.abs(full["image"].numpy().astype(int) - reduced["image"].numpy().astype(int))
    assert 0 < difference.mean() < 12


def test_options_reach_the_dataset(records):
    dataset = tfpipe.Pipeline(records).options(deterministic=True, ram_budget_mb=64, threads=2)
    options = dataset.build().options()
    assert options.deterministic is True
    assert options.autotune.ram_budget == 64 << 20
    assert options.threading.private_threadpool_size == 2


def test_model_fit_consumes_the_pipeline(records):
    dataset = (
        tfpipe.Pipeline(records, rescale=1 / 255)
        .shuffle(seed=0)
        .batch(8)
        .as_supervised("image", "label")
        .build()
    )
    model = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])


def test_build_declares_the_epoch_length_and_fails_when_records_are_missing(records, tmp_path):
    assert int(tfpipe.Pipeline(records).batch(5).build().cardinality()) == 5  # ceil(24 / 5)
    assert int(tfpipe.Pipeline(records).batch(5, drop_remainder=True).build().cardinality()) == 4
    assert (
        tfpipe.Pipeline(records).batch(5).repeat().build().cardinality()
        == tf.data.INFINITE_CARDINALITY
    )
    assert (
        tfpipe.Pipeline(records).filter(lambda ex: ex["id"] > 3).batch(5).build().cardinality() < 0
    )

    # Metadata whose total over-counts its shards is refused before anything is read.
    info = DatasetInfo.load(records)
    for shard in info.files:
        (tmp_path / shard.name).write_bytes(shard.read_bytes())
    text = Path(f"{records}.json").read_text().replace('"num_examples": 24', '"num_examples": 30')
    (tmp_path / "train.json").write_text(text)
    with pytest.raises(SchemaError, match=r"train\.json.*declares 30 examples.*up to 24"):
        tfpipe.Pipeline(str(tmp_path / "train"))


def test_record_shuffle_buffer_holds_at_most_32_mib(tmp_path):
    big = np.zeros((1000, 128, 128, 3), np.uint8)  # 48 KiB of raw pixels a record, 47 MiB in all
    info = tfpipe.write_tfrecords(
        tfpipe.from_arrays({"image": big}), tmp_path / "big", progress=False
    )
    per_record = info.num_bytes / info.num_examples

    def buffer(pipeline: tfpipe.Pipeline) -> int:
        return int(re.search(r"shuffle records \(buffer (\d+)", pipeline.explain())[1])

    assert buffer(tfpipe.Pipeline(str(tmp_path / "big")).shuffle(seed=0)) == int(
        32 * 2**20 // per_record
    )  # ~680 records, not 1000
    assert buffer(tfpipe.Pipeline(str(tmp_path / "big")).shuffle(buffer_size=900)) == 900


def test_declared_batch_size_and_examples_per_epoch(records):
    pipeline = tfpipe.Pipeline(records)
    assert pipeline.batch_size is None and pipeline.examples_per_epoch() == NUM
    assert pipeline.batch(5).batch_size == 5
    assert (pipeline.batch(5).examples_per_epoch(), pipeline.batch(5).batches_per_epoch()) == (
        NUM,
        5,
    )
    dropped = pipeline.take(7).batch(5, drop_remainder=True)
    assert (dropped.examples_per_epoch(), dropped.batches_per_epoch()) == (5, 1)
    assert sum(len(b["label"]) for b in dropped.build()) == 5
    assert pipeline.filter(lambda ex: ex["label"] == 1).batch(5).examples_per_epoch() is None


def test_building_converts_no_stage_with_autograph(records, image_folder, tmp_path, monkeypatch):
    """tfpipe's stages are traced as written: AutoGraph's conversion (it parses the module's
    source, writing `__autograph_generated_file*.py` to the temporary folder) took ~0.5 s of
    the time to the first batch for `as_supervised` alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for source in (records, tfpipe.from_directory(image_folder)):
        pipeline = tfpipe.Pipeline(source, image_size=(8, 8)).shuffle().batch(4)
        pipeline.as_supervised("image", "label").build()
    assert not list(tmp_path.glob("__autograph_generated_file*"))


def test_keras_given_an_unbuilt_pipeline_says_to_build_it(records):
    pipeline = tfpipe.Pipeline(records).batch(8).as_supervised("image", "label")
    fix = "unbuilt: model.fit takes pipeline.build()"
    assert repr(pipeline) == f"Pipeline({records!r}, batch_size=8, {fix})"
    assert repr(tfpipe.Pipeline(records)) == f"Pipeline({records!r}, no batch(), {fix})"
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten()])
    model.add(keras.layers.Dense(3))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match=re.escape(f"x={pipeline!r}")):
        model.fit(pipeline, epochs=1, verbose=0)
