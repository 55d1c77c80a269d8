"""`Pipeline.sample_from`: weighted mixtures with exact counts, orders and resume."""

from __future__ import annotations

import collections
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import SchemaError, SourceError, TfpipeWarning
from with_backend import run_fresh


def _ids(dataset: tf.data.Dataset) -> list[int]:
    return [int(i) for batch in dataset for i in np.ravel(batch["id"])]


def _records(root: Path, name: str, ids: np.ndarray, shards: int = 2) -> Path:
    source = tfpipe.from_arrays({"id": ids, "label": ids % 3})
    tfpipe.write_tfrecords(source, root / name, num_shards=shards, progress=False)
    return root / name


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Records of ids 0..299 and 1000..1049."""
    root = tmp_path_factory.mktemp("mixture")
    return (
        _records(root, "many", np.arange(300)),
        _records(root, "few", np.arange(1000, 1050)),
    )


def _mixed(two: tuple[Path, Path], **options: Any) -> tfpipe.Pipeline:
    sources = [tfpipe.Pipeline(path).shuffle(seed=i) for i, path in enumerate(two)]
    return tfpipe.Pipeline.sample_from(sources, **options)


def test_weights_are_realised_exactly(tmp_path: Path) -> None:
    """Over 10^4 examples the shares are those asked (to one example), and every example of a
    source appears as often as the others of that source."""
    many = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(3000)})).shuffle(seed=0)
    few = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(10_000, 10_500)})).shuffle(seed=1)
    mixed = tfpipe.Pipeline.sample_from(
        [many, few], [0.7, 0.3], seed=5, examples_per_epoch=10_000
    ).batch(500)
    assert mixed.mixture.counts == (7000, 3000)
    ids = _ids(mixed.build())
    assert len(ids) == 10_000
    share = sum(i >= 10_000 for i in ids) / len(ids)
    assert share == pytest.approx(0.3, abs=1e-4)
    seen = collections.Counter(i for i in ids if i >= 10_000)
    assert set(seen.values()) == {6}  # 3000 draws of 500 examples: six passes
    assert set(collections.Counter(i for i in ids if i < 10_000).values()) <= {2, 3}


def test_the_same_seed_gives_the_same_order(two: tuple[Path, Path]) -> None:
    first = _ids(_mixed(two, weights=[1, 1], seed=3).start_at(0).repeat(2).batch(10).build())
    again = _ids(_mixed(two, weights=[1, 1], seed=3).start_at(0).repeat(2).batch(10).build())
    other = _ids(_mixed(two, weights=[1, 1], seed=4).start_at(0).repeat(2).batch(10).build())
    assert first == again != other
    epoch = _ids(_mixed(two, weights=[1, 1], seed=3).batch(10).build())
    assert len(epoch) == 100 and sorted(epoch) != epoch


def test_epochs_differ_and_sources_go_on_where_they_stopped(two: tuple[Path, Path]) -> None:
    """first_exhausted: every example of the source used up first, once per epoch; the other
    source's examples follow on across epochs, each of its passes in its own order (that of
    the source's own Pipeline with start_at)."""
    mixed = _mixed(two, weights=[1, 1], seed=0).batch(10)
    assert mixed.mixture.counts == (50, 50) and mixed.batches_per_epoch() == 10
    ids = _ids(mixed.start_at(0).repeat(7).build())
    epochs = [ids[e * 100 : (e + 1) * 100] for e in range(7)]
    for epoch in epochs:
        assert sorted(i for i in epoch if i >= 1000) == list(range(1000, 1050))
    many = [i for i in ids if i < 1000]  # 350 draws: one pass of 300 and 50 of the next
    own = tfpipe.Pipeline(two[0]).shuffle(seed=0).batch(10).start_at(0).repeat(2).build()
    assert many == _ids(own)[:350]
    plain = _mixed(two, weights=[1, 1], seed=0).batch(10).build()
    assert _ids(plain) != _ids(plain)  # without start_at too, every epoch a new order


def test_all_exhausted_sees_every_example(two: tuple[Path, Path]) -> None:
    mixed = _mixed(two, weights=[1, 1], stopping_strategy="all_exhausted").batch(60)
    assert mixed.mixture.counts == (300, 300)
    ids = _ids(mixed.build())
    assert set(ids) == set(range(300)) | set(range(1000, 1050))
    assert collections.Counter(i for i in ids if i >= 1000)[1000] == 6  # it cycles


def test_start_at_resumes_with_the_remaining_batches(two: tuple[Path, Path]) -> None:
    mixed = _mixed(two, weights=[2, 1], seed=7).batch(8).as_supervised("id", "label")
    whole = [b[0].numpy().tolist() for b in mixed.start_at(0).repeat(4).build()]
    per_epoch = mixed.batches_per_epoch()
    assert mixed.mixture.counts == (100, 50) and per_epoch == 19  # the few used up first
    for epoch, batch in ((0, 3), (2, 9), (3, 0)):
        rest = [b[0].numpy().tolist() for b in mixed.start_at(epoch, batch).repeat(4).build()]
        assert rest == whole[epoch * per_epoch + batch :]


@pytest.mark.fault(
    "mixed sources giving a feature in another dtype or shape (another image_size=)",
    reader="Pipeline.sample_from",
    outcome="SchemaError naming the feature, both sources and what each gives",
)
def test_a_features_dtype_or_shape_must_agree(tmp_path: Path) -> None:
    images = np.zeros((6, 8, 8, 3), np.uint8)
    small = tfpipe.from_arrays({"image": images, "label": np.arange(6)})
    large = tfpipe.from_arrays({"image": np.zeros((6, 16, 16, 3), np.uint8), "y": np.arange(6)})
    with pytest.raises(
        SchemaError,
        match=r"feature 'image' differs.*source 0.*uint8 of shape "
        r"\(8, 8, 3\).*source 1.*uint8 of shape \(16, 16, 3\)",
    ):
        tfpipe.Pipeline.sample_from([small, large])
    fixed = tfpipe.Pipeline(large, image_size=(8, 8)).rename({"y": "label"})
    mixed = tfpipe.Pipeline.sample_from([tfpipe.Pipeline(small), fixed]).batch(4)
    assert list(mixed.schema) == ["image", "label"]
    assert next(iter(mixed.as_supervised("image", "label").build()))[0].shape == (4, 8, 8, 3)
    extra = tfpipe.from_arrays({"image": images, "label": np.arange(6), "w": np.ones(6)})
    mixed = tfpipe.Pipeline.sample_from([small, extra])
    assert list(mixed.schema) == ["image", "label"]
    assert "left out (not in every source): w" in mixed.explain()
    with pytest.raises(SchemaError, match="share no feature"):
        tfpipe.Pipeline.sample_from([small, tfpipe.from_arrays({"other": np.arange(3)})])


def test_rename_checks_the_names() -> None:
    source = tfpipe.from_arrays({"a": np.arange(3), "b": np.arange(3)})
    with pytest.raises(SchemaError, match=r"rename: feature 'c' is not in the schema"):
        tfpipe.Pipeline(source).rename({"c": "d"})
    with pytest.raises(SchemaError, match=r"two features would be named 'b'"):
        tfpipe.Pipeline(source).rename({"a": "b"})
    renamed = tfpipe.Pipeline(source).rename({"a": "x"}).as_supervised("x", "b").batch(3)
    assert next(iter(renamed.build()))[0].numpy().tolist() == [0, 1, 2]


@pytest.mark.fault(
    "a mixed source that batches, yields pairs, filters (unknown size), or bad weights",
    reader="Pipeline.sample_from",
    outcome="ValueError or SourceError naming the source (sources[i]) and the fix",
)
@pytest.mark.parametrize(
    ("sources", "options", "error", "message"),
    [
        ("batched", {}, ValueError, r"sources\[0\] .*batch\(\) the mixture instead"),
        ("pairs", {}, ValueError, r"sources\[0\] .*as_supervised\(\) on the mixture"),
        ("filtered", {}, SourceError, r"source 0 .*examples per epoch are unknown"),
        ("plain", {"weights": [1]}, ValueError, "one weight per source"),
        ("plain", {"weights": [1, -1]}, ValueError, "finite numbers >= 0"),
        ("plain", {"weights": [0, 0]}, ValueError, "must not all be 0"),
        ("plain", {"stopping_strategy": "longest"}, ValueError, "stopping_strategy must be"),
    ],
)
def test_bad_mixtures_are_refused(sources: str, options: Any, error: type, message: str) -> None:
    source = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(10)}))
    first = {
        "batched": source.batch(2),
        "pairs": source.as_supervised("id", "id"),
        "filtered": source.filter(lambda ex: ex["id"] > 2),
        "plain": source,
    }[sources]
    with pytest.raises(error, match=message):
        tfpipe.Pipeline.sample_from([first, source], **options)


def test_a_mixture_is_not_shuffled_or_served_whole() -> None:
    source = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(10)}))
    mixed = tfpipe.Pipeline.sample_from([source, source])
    with pytest.raises(ValueError, match="shuffle each source"):
        mixed.shuffle(seed=0)
    with pytest.raises(ValueError, match="call distribute\\(\\) on each source"):
        mixed.distribute("localhost:5050").build()


def test_each_worker_reads_its_share_once(two: tuple[Path, Path]) -> None:
    """Two workers (white box: the part build_distributed gives each, as one process cannot
    run two): each reads its own shard of every source, so no example is read by both, and
    each epoch holds its share of the counts."""
    mixed = _mixed(two, weights=[1, 1], seed=2).batch(10)

    def part(worker: int) -> list[int]:
        return _ids(mixed._with(shard=(2, worker), batch=(5, True), start=(0, 0)).build())

    assert mixed._recipe.input.worker_counts(2) == [50, 50]
    zero, one = part(0), part(1)
    assert len(zero) == len(one) == 50
    assert not set(zero) & set(one)
    assert sorted(i for i in zero + one if i >= 1000) == list(range(1000, 1050))


@pytest.mark.fault(
    "a backup of a mixture resumed with other weights",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="refused: the difference names both mixtures' weights",
)
def test_the_identity_holds_the_weights() -> None:
    """The identity of a mixture holds its sources, weights and seed: a backup of another
    mixture is refused, naming what changed (the kill and resume: tests/training)."""
    source = tfpipe.from_arrays({"id": np.arange(12), "label": np.arange(12) % 2})
    other = tfpipe.from_arrays({"id": np.arange(100, 106), "label": np.arange(6) % 2})
    one = tfpipe.Pipeline.sample_from([source, other], [1, 1], seed=0).batch(4)
    two = tfpipe.Pipeline.sample_from([source, other], [2, 1], seed=0).batch(4)
    assert one.identity() != two.identity()
    assert "weights 2/3, 1/3" in " ".join(one.identity().differences(two.identity()))


def test_mixed_sources_are_the_pipelines_the_mixture_reads(two: tuple[Path, Path]) -> None:
    """In order, unbatched, an unseeded shuffle given the seed the mixture gave it (so a
    source timed alone reads what the mixture reads); none for another Pipeline."""
    unseeded = tfpipe.Pipeline(two[1]).shuffle()
    mixed = tfpipe.Pipeline.sample_from([tfpipe.Pipeline(two[0]), unseeded]).batch(10)
    many, few = mixed.mixed_sources()
    assert (many.seed, many.batch_size, many.examples_per_epoch()) == (None, None, 300)
    assert few.seed is not None and few.examples_per_epoch() == 50
    assert _ids(few.batch(50).build()) == _ids(few.batch(50).build())  # seeded: one order
    assert sorted(_ids(few.batch(50).build())) == list(range(1000, 1050))
    assert tfpipe.Pipeline(two[0]).mixed_sources() == ()


MIRRORED = textwrap.dedent(
    """
    import os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import tfpipe

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    many = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(30)})).shuffle(seed=1)
    few = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(100, 110)})).shuffle(seed=2)
    mixed = tfpipe.Pipeline.sample_from([many, few], [3, 1], seed=4).batch(8)
    assert mixed.mixture.counts == (30, 10)
    every = sorted([*range(30), *range(100, 110)])

    def steps(feed, count):
        batches = iter(feed.dataset)
        return [
            sorted(int(i) for part in strategy.experimental_local_results(next(batches)["id"])
                   for i in part.numpy())
            for _ in range(count)
        ]

    for feed in (mixed.build_distributed(strategy), mixed.start_at(0).build_distributed(strategy)):
        assert (feed.steps_per_epoch, feed.per_replica_batch_size) == (5, 4)
        whole = steps(feed, 15)
        for epoch in range(3):
            assert sorted(sum(whole[epoch * 5 : (epoch + 1) * 5], [])) == every, (epoch, whole)
    assert steps(mixed.start_at(1, 3).build_distributed(strategy), 7) == whole[8:]
    print("OK")
    """
)


@pytest.mark.slow
def test_build_distributed_gives_each_example_once_per_epoch_over_two_replicas(
    tmp_path: Path,
) -> None:
    """A 2-replica MirroredStrategy on CPU (a fresh process: logical devices are set before
    TensorFlow starts): epochs of 30 + 10 ids at 3:1 hold every id once, also from
    start_at(0), and a resumed position continues that run's steps."""
    run_fresh(MIRRORED, tmp_path)


@pytest.mark.fault(
    "mixed TFRecords without tfpipe metadata (no count)",
    reader="Pipeline.sample_from",
    outcome="their frames counted once, a TfpipeWarning naming the source and the time",
)
def test_records_without_metadata_are_counted(tmp_path: Path) -> None:
    """Plain TensorFlow records (no tfpipe metadata): each source's records are counted once,
    with a warning naming it, and the mixture's epochs are exact."""
    for name, first in (("a", 0), ("b", 100)):
        with tf.io.TFRecordWriter(str(tmp_path / f"{name}.tfrecord")) as writer:
            for i in range(first, first + (12 if first else 30)):
                feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
                example = tf.train.Example(features=tf.train.Features(feature={"id": feature}))
                writer.write(example.SerializeToString())
    sources = [tfpipe.Pipeline(tmp_path / f"{n}.tfrecord").shuffle(seed=0) for n in "ab"]
    with pytest.warns(TfpipeWarning, match="has no tfpipe metadata") as caught:
        mixed = tfpipe.Pipeline.sample_from(sources, [1, 1])
    assert [w.filename for w in caught] == [__file__] * 2
    assert re.search(
        r"source 1 \(.*b.tfrecord\) .*: its 12 records were counted", str(caught[1].message)
    )
    assert mixed.mixture.counts == (12, 12)
    ids = _ids(mixed.batch(5).build())
    assert sorted(i for i in ids if i >= 100) == list(range(100, 112)) and len(ids) == 24


def test_an_echoed_mixture_resumes_exactly() -> None:
    """echo() after sample_from: the windows are skipped as choices of the mixture, so the
    rest of a run is the uninterrupted run's; echo() on a source is refused."""
    many = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(100)})).shuffle(seed=1)
    few = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(1000, 1030)})).shuffle(seed=2)
    mixed = tfpipe.Pipeline.sample_from([many, few], seed=3).echo(2, buffer_size=8).batch(8)
    assert (mixed.examples_per_epoch(), mixed.batches_per_epoch()) == (120, 15)
    whole = _ids(mixed.start_at(0).repeat(3).build())
    assert collections.Counter(whole[:120])[1000] == 2
    for epoch, batch in ((0, 3), (1, 7), (2, 0)):
        rest = _ids(mixed.start_at(epoch, batch).repeat(3).build())
        assert rest == whole[(epoch * 15 + batch) * 8 :]
    with pytest.raises(ValueError, match=r"sources\[1\] .*echo\(\) the mixture instead"):
        tfpipe.Pipeline.sample_from([many, few.echo(2)])
