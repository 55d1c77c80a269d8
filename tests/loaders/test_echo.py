"""Pipeline.echo: each example (or batch) k times per epoch, spread out, counted, resumable."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.loaders.distributed_pipeline import worker_datasets
from tfpipe.loaders.echo import Echo, echoed, window_seeds
from tfpipe.loaders.position import Identity

NUM = 24


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "image": rng.integers(0, 256, (NUM, 8, 8, 3), dtype=np.uint8),
        "id": np.arange(NUM),
    }


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> str:
    """NUM raw-image examples with an `id`, in order, in 3 shards."""
    prefix = tmp_path_factory.mktemp("echo") / "train"
    source = tfpipe.from_arrays(_arrays())
    tfpipe.write_tfrecords(source, prefix, num_shards=3, shuffle=False, progress=False)
    return str(prefix)


def _batches(dataset: tf.data.Dataset, count: int | None = None) -> list[list[int]]:
    batches = dataset if count is None else dataset.take(count)
    return [batch["id"].numpy().tolist() for batch in batches]


def _flat(batches: list[list[int]]) -> list[int]:
    return [i for batch in batches for i in batch]


@pytest.mark.parametrize("unit", ["example", "batch"])
def test_each_example_k_times_per_epoch_and_counts(records: str, unit: str) -> None:
    pipeline = tfpipe.Pipeline(records).shuffle(seed=0).echo(3, unit=unit).batch(7)
    dataset = pipeline.build()
    batches = _batches(dataset)
    assert collections.Counter(_flat(batches)) == {i: 3 for i in range(NUM)}
    # example echo: ceil(72 / 7) batches; batch echo: 3 x ceil(24 / 7), the short one 3 times
    expected, short = (11, [2]) if unit == "example" else (12, [3, 3, 3])
    assert len(batches) == pipeline.batches_per_epoch() == expected
    assert int(dataset.cardinality()) == expected and pipeline.examples_per_epoch() == 72
    assert [len(b) for b in batches if len(b) < 7] == short
    assert (pipeline.echo_factor, pipeline.echo_unit) == (3, unit)
    assert (tfpipe.Pipeline(records).echo_factor, tfpipe.Pipeline(records).echo_unit) == (1, None)


def test_counts_with_drop_remainder(records: str) -> None:
    base = tfpipe.Pipeline(records).shuffle(seed=0)
    by_example = base.echo(3).batch(5, drop_remainder=True)
    by_batch = base.echo(3, unit="batch").batch(5, drop_remainder=True)
    assert (by_example.examples_per_epoch(), by_example.batches_per_epoch()) == (70, 14)
    assert (by_batch.examples_per_epoch(), by_batch.batches_per_epoch()) == (60, 12)
    assert len(_batches(by_example.build())) == 14
    ids = _flat(_batches(by_batch.build()))
    assert len(ids) == 60 and set(collections.Counter(ids).values()) == {3}
    assert base.echo(1).batch(5).batches_per_epoch() == 5  # factor 1: no echo


def test_copies_are_spread_within_the_window_bound(records: str) -> None:
    """Window 5 of 24 examples, factor 3: no id twice in a row, a copy fewer than 2 x 5
    elements after the one before, all copies within 3 x 5 elements."""
    pipeline = tfpipe.Pipeline(records).shuffle(seed=1).echo(3, buffer_size=5).batch(6)
    ids = _flat(_batches(pipeline.build()))
    assert all(a != b for a, b in itertools.pairwise(ids))
    places = collections.defaultdict(list)
    for place, i in enumerate(ids):
        places[i].append(place)
    assert all(max(np.diff(p)) < 10 and p[-1] - p[0] < 15 for p in places.values())
    assert "echo each example 3 times (windows of 5 examples" in pipeline.explain()


def test_batches_are_never_echoed_twice_in_a_row(records: str) -> None:
    pipeline = tfpipe.Pipeline(records).shuffle(seed=2).batch(4).echo(4, unit="batch")
    batches = _batches(pipeline.build())
    assert len(batches) == 24 and all(a != b for a, b in itertools.pairwise(batches))
    assert "echo each batch 4 times (windows of 16 batches" in pipeline.explain()


def test_same_seed_same_order_and_epochs_differ(records: str) -> None:
    pipeline = tfpipe.Pipeline(records).shuffle(seed=3).echo(2).batch(8)
    dataset = pipeline.build()
    first, second = _batches(dataset), _batches(dataset)
    assert first != second
    assert _batches(pipeline.build()) == first
    other = tfpipe.Pipeline(records).shuffle(seed=4).echo(2).batch(8)
    assert _batches(other.build()) != first
    # no shuffle: the windows are still in a new order each run
    unseeded = tfpipe.Pipeline(records).echo(2).batch(8)
    assert _flat(_batches(unseeded.build())) != _flat(_batches(unseeded.build()))


def test_uint8_images_keep_their_pixels(records: str) -> None:
    images = _arrays()["image"]
    dataset = tfpipe.Pipeline(records).shuffle(seed=0).echo(2).batch(7).build()
    assert dataset.element_spec["image"].dtype == tf.uint8
    seen = 0
    for batch in dataset:
        for i, image in zip(batch["id"].numpy(), batch["image"].numpy(), strict=True):
            np.testing.assert_array_equal(image, images[i])
            seen += 1
    assert seen == 2 * NUM


@pytest.mark.parametrize("unit", ["example", "batch"])
def test_list_features_stay_with_their_examples(unit: str) -> None:
    tokens = [list(range(i % 5)) for i in range(NUM)]
    source = tfpipe.from_arrays({"tokens": tokens, "id": np.arange(NUM)})
    dataset = tfpipe.Pipeline(source).shuffle(seed=0).echo(2, unit=unit).batch(5).build()
    assert isinstance(dataset.element_spec["tokens"], tf.RaggedTensorSpec)
    count = 0
    for batch in dataset:
        for i, values in zip(batch["id"].numpy(), batch["tokens"].to_list(), strict=True):
            assert values == tokens[i]
            count += 1
    assert count == 2 * NUM


def test_echo_goes_before_the_first_random_map_and_after_decoding(records: str) -> None:
    """The deterministic map runs once per fresh example, the random Joint on every copy:
    the copies of an example are cropped differently."""

    def double(example: dict) -> dict:
        return {**example, "twice": 2 * example["id"]}

    joint = tfpipe.augment.Joint(crop=(4, 4), seed=0)
    pipeline = tfpipe.Pipeline(records).shuffle(seed=0).map(double).map(joint).echo(2).batch(6)
    stages = pipeline.explain().splitlines()
    where = {name: i for i, line in enumerate(stages) for name in ("map(double)", "echo", "Joint")
             if name in line}  # fmt: skip
    assert where["map(double)"] < where["echo"] < where["Joint"]
    assert "decode" not in " ".join(stages[where["echo"] :])
    crops = collections.defaultdict(list)
    for batch in pipeline.build():
        assert batch["twice"].numpy().tolist() == (2 * batch["id"]).numpy().tolist()
        for i, image in zip(batch["id"].numpy(), batch["image"].numpy(), strict=True):
            crops[i].append(image.tobytes())
    assert all(len(c) == 2 for c in crops.values())
    assert sum(a != b for a, b in crops.values()) > NUM // 2


@pytest.mark.parametrize("unit", ["example", "batch"])
def test_start_at_resumes_exactly_inside_a_window(records: str, unit: str) -> None:
    """Windows of 5 (example) or 2 (batch) elements, factor 3: batches of start_at(e, b) are
    those of the uninterrupted run from start_at(0, 0), Joint's random crops included."""
    joint = tfpipe.augment.Joint(crop=(4, 4), seed=0)
    window = 5 if unit == "example" else 2
    pipeline = (
        tfpipe.Pipeline(records).shuffle(seed=7).map(joint)
        .echo(3, unit=unit, buffer_size=window).batch(4).repeat(3)
    )  # fmt: skip
    per_epoch = pipeline.batches_per_epoch()
    assert per_epoch == 18

    def batches(dataset: tf.data.Dataset) -> list[tuple[list[int], bytes]]:
        return [(b["id"].numpy().tolist(), b["image"].numpy().tobytes()) for b in dataset]

    whole = batches(pipeline.start_at(0, 0).build())
    assert len(whole) == 3 * per_epoch
    for epoch, batch in [(0, 5), (1, 7), (2, 17)]:
        rest = batches(pipeline.start_at(epoch, batch).build())
        assert rest == whole[epoch * per_epoch + batch :], (epoch, batch)
    epochs = [_flat([ids for ids, _ in whole[e * 18 : (e + 1) * 18]]) for e in range(3)]
    assert all(collections.Counter(e) == {i: 3 for i in range(NUM)} for e in epochs)
    assert epochs[0] != epochs[1]


def test_worker_parts_echo_their_own_share() -> None:
    """Two workers (their parts built as build_distributed builds them): every fresh example
    twice per epoch over both; one worker's steps follow the echoed counts."""
    source = tfpipe.from_arrays({"id": np.arange(NUM)})
    for unit in ("example", "batch"):
        pipeline = tfpipe.Pipeline(source).shuffle(seed=0).echo(2, unit=unit).batch(4)
        recipe = pipeline.start_at(0)._recipe
        part = worker_datasets(recipe, 2)
        ids = [_flat(_batches(part(w, per_replica=2, batches=12, skip=0), 12)) for w in (0, 1)]
        assert collections.Counter(ids[0] + ids[1]) == {i: 2 for i in range(NUM)}, unit
        built = pipeline.build_distributed(tf.distribute.MirroredStrategy(["/cpu:0"]))
        assert built.steps_per_epoch == 12, unit
        steps = iter(built.dataset)
        epoch = [i for _ in range(12) for i in next(steps)["id"].numpy().tolist()]
        assert collections.Counter(epoch) == {i: 2 for i in range(NUM)}, unit
    drop = tfpipe.Pipeline(source).echo(3, unit="batch").batch(5)
    built = drop.shuffle(seed=0).build_distributed(tf.distribute.get_strategy())
    assert built.steps_per_epoch == 12  # 3 x (24 // 5) whole batches


def test_identity_includes_the_echo(records: str) -> None:
    base = tfpipe.Pipeline(records).shuffle(seed=0).batch(4)
    assert base.identity() == base.echo(1).identity()
    echoed, other = base.echo(2).identity(), base.echo(3).identity()
    assert echoed.echo == "2 per example, window 24"
    assert other.differences(echoed) == [
        "echo: saved 2 per example, window 24, now 3 per example, window 24"
    ]
    assert base.identity().differences(echoed) == ["echo: saved 2 per example, window 24, now none"]
    assert (
        Identity.from_dict({k: v for k, v in base.identity().to_dict().items() if k != "echo"})
        == base.identity()
    )  # a backup saved before echo existed


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: p.echo(0), "factor"),
        (lambda p: p.echo(2.5), "factor"),
        (lambda p: p.echo(2, unit="epoch"), "unit='epoch'"),
        (lambda p: p.echo(2, buffer_size=0), "buffer_size"),
        (lambda p: p.echo(2, unit="batch").build(), r'echo\(unit="batch"\) needs a batch\(\)'),
        (lambda p: p.echo(2).batch(4).start_at(0, 1), r"echo\(\) orders its windows at random"),
    ],
)
@pytest.mark.fault(
    "echo() with a factor < 1 or not an int, another unit, no batch() for unit='batch', or "
    "start_at without a seed",
    reader="Pipeline.echo",
    outcome="ValueError naming the argument and the value, or the fix",
)
def test_bad_arguments_are_named(records: str, call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(tfpipe.Pipeline(records))


def test_cache_then_echo_and_each_repeated_pass_echoed_on_its_own(records: str) -> None:
    pipeline = tfpipe.Pipeline(records).cache().shuffle(seed=0).echo(2, buffer_size=7).batch(5)
    repeated = pipeline.repeat(2)
    stages = repeated.explain()
    assert (
        stages.index("cache (memory)")
        < stages.index("echo each example 2")
        < stages.index("repeat 2 times")
    )
    ids = _flat(_batches(repeated.build()))
    assert len(ids) == 4 * NUM
    for epoch in (ids[: 2 * NUM], ids[2 * NUM :]):
        assert collections.Counter(epoch) == {i: 2 for i in range(NUM)}
    assert (
        pipeline.echo(1).explain()
        == tfpipe.Pipeline(records).cache().shuffle(seed=0).batch(5).explain()
    )


def test_echo_runs_on_the_service_workers(records: str) -> None:
    for unit in ("example", "batch"):
        pipeline = tfpipe.Pipeline(records).shuffle().batch(8).echo(2, unit=unit)
        stages = pipeline.distribute("localhost:5050").explain()
        assert stages.index(f"echo each {unit} 2 times") < stages.index("distribute: ")


def test_images_of_their_own_sizes_come_back_dense_and_whole() -> None:
    """A value ragged in two dimensions inside a window (an image of its own size) is its
    dense self again after the echo, with no padding."""

    def image(n: tf.Tensor) -> dict:
        shape = tf.stack([n % 3 + 1, n % 2 + 2, 3])
        return {"id": n, "image": tf.fill(shape, tf.cast(n, tf.uint8))}

    examples = tf.data.Dataset.range(6).map(image)
    dataset = echoed(examples, Echo(2, "example"), 4, window_seeds(0))
    assert dataset.element_spec == examples.element_spec
    seen = collections.Counter()
    for example in dataset:
        n = int(example["id"])
        assert example["image"].shape == (n % 3 + 1, n % 2 + 2, 3)
        assert (example["image"].numpy() == n).all()
        seen[n] += 1
    assert seen == {n: 2 for n in range(6)}
