"""Exact mid-epoch resume: `start_at` positions, and `tfpipe.fit(backup_dir=...)` after SIGKILL."""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import resume_run
import tensorflow as tf

import tfpipe
from example_scripts import load
from tfpipe.errors import DecodeError, SourceError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo

RUN = Path(__file__).with_name("resume_run.py")
STEPS = 10  # 40 examples in batches of 4
KILL = (1, 7)  # after batch 7 of epoch 1 (the second): step 17 is the last trained
SAVED_STEP = 16  # the last multiple of save_every=4 before the kill
TIMEOUT_S = 300
pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


def _ids(dataset: tf.data.Dataset, key: str = "id") -> list[list[int]]:
    return [b[key].numpy().tolist() for b in dataset]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return resume_run.make_data("records", tmp_path_factory.mktemp("records"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return resume_run.make_data("folder", tmp_path_factory.mktemp("folder"))


def _folder_ids(dataset: tf.data.Dataset) -> list[list[int]]:
    return [
        (x[:, 0, 0, 0].numpy().astype(int) + 256 * x[:, 0, 0, 1].numpy().astype(int)).tolist()
        for x, _ in dataset
    ]


def test_start_at_gives_the_batches_of_an_uninterrupted_run(records: Path) -> None:
    pipeline = tfpipe.Pipeline(records).shuffle(seed=3).batch(6)
    whole = _ids(pipeline.start_at(0).repeat(3).build())
    per_epoch = pipeline.batches_per_epoch()
    assert per_epoch == 7 and len(whole) == 21
    epochs = [whole[e * 7 : (e + 1) * 7] for e in range(3)]
    for epoch in epochs:  # each epoch one pass, each in its own order
        assert sorted(i for batch in epoch for i in batch) == list(range(40))
    assert epochs[0] != epochs[1] != epochs[2]
    assert _ids(pipeline.start_at(1, 4).build()) == epochs[1][4:]
    assert _ids(pipeline.start_at(1, 4).repeat(3).build()) == whole[7 + 4 :]
    # A pure function of (seed, epoch): not of earlier iterators, nor of tf.random.set_seed.
    rest = pipeline.start_at(2, 1).build()
    assert _ids(rest) == _ids(rest) == epochs[2][1:]
    tf.random.set_seed(123)
    try:
        assert _ids(pipeline.start_at(2, 1).build()) == epochs[2][1:]
    finally:
        tf.random.set_seed(None)
    assert (
        _ids(tfpipe.Pipeline(records).shuffle(seed=4).batch(6).start_at(1).build()) != (epochs[1])
    )


def test_start_at_over_a_folder_and_arrays(folder: Path) -> None:
    pipeline = tfpipe.Pipeline(tfpipe.from_directory(folder), image_size=(4, 4))
    pipeline = pipeline.shuffle(seed=1).batch(8).as_supervised("image", "label")
    whole = _folder_ids(pipeline.start_at(0).repeat(2).build())
    assert sorted(i for batch in whole[5:] for i in batch) == list(range(40))
    assert _folder_ids(pipeline.start_at(1, 2).build()) == whole[5 + 2 :]
    arrays = tfpipe.from_arrays({"id": np.arange(30)})
    by_index = tfpipe.Pipeline(arrays).shuffle(seed=0).batch(7)
    assert _ids(by_index.start_at(0, 3).build()) == _ids(by_index.start_at(0).build())[3:]
    in_order = tfpipe.Pipeline(arrays).batch(7).start_at(1, 3).build()  # no shuffle, no seed
    assert _ids(in_order) == [[21, 22, 23, 24, 25, 26, 27], [28, 29]]  # was: a ValueError


def test_start_at_skips_records_before_parsing(records: Path) -> None:
    plan = tfpipe.Pipeline(records).shuffle(seed=0).batch(4).start_at(1, 2).explain()
    lines = plan.splitlines()
    skip = next(i for i, line in enumerate(lines) if "skip the records" in line)
    parse = next(i for i, line in enumerate(lines) if "parse_example" in line)
    assert skip < parse
    assert "seed=Tensor" not in plan and "epoch from 1" in plan


@pytest.mark.fault(
    "damaged image file among the batches before the start position",
    reader="Pipeline.start_at",
    outcome="never read: the resumed batches come, a full epoch fails",
)
def test_skipped_images_are_never_decoded(tmp_path: Path) -> None:
    folder = resume_run.make_data("folder", tmp_path / "images")
    pipeline = tfpipe.Pipeline(tfpipe.from_directory(folder), image_size=(4, 4))
    pipeline = pipeline.shuffle(seed=2).batch(8).as_supervised("image", "label")
    epoch = _folder_ids(pipeline.start_at(0).build())
    damaged = epoch[0][0]
    (folder / f"class_{damaged % 2}" / f"{damaged:05d}.png").write_bytes(b"not a png")
    assert _folder_ids(pipeline.start_at(0, 1).build()) == epoch[1:]
    bad = rf"{damaged:05d}\.png, feature 'image': cannot be decoded"
    with pytest.raises(DecodeError, match=bad):  # the built dataset names the file
        _folder_ids(pipeline.start_at(0).build())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.shuffle(), "shuffle() has no seed"),
        (lambda p: p.shuffle(seed=0).cache(), "cache() is set"),
        (lambda p: p.shuffle(seed=0).filter(lambda ex: ex["id"] > 3), "filter()"),
        (lambda p: p.shuffle(seed=0).options(deterministic=False), "deterministic=False"),
        (lambda p: p.repeat(2), "repeat() ends before"),
    ],
)
def test_start_at_refuses_what_changes_batches(records: Path, change: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        change(tfpipe.Pipeline(records).batch(4)).start_at(2, 1)


def test_start_at_checks_the_position(records: Path) -> None:
    pipeline = tfpipe.Pipeline(records).batch(4)
    with pytest.raises(ValueError, match="less than the 10 batches"):
        pipeline.start_at(0, 10)
    with pytest.raises(ValueError, match="epoch must be a non-negative int"):
        pipeline.start_at(-1)


def test_sequence_loader_start_at() -> None:
    source = tfpipe.from_arrays({"id": np.arange(30), "label": np.arange(30) % 2})
    loader = tfpipe.SequenceLoader(source, 4, x="id", y="label", seed=7)
    loader.epoch = 2
    epoch = [loader[i][0].tolist() for i in range(len(loader))]
    rest = loader.start_at(2, 5)
    assert len(rest) == len(loader) - 5 == 3 and loader.epoch == 2
    assert [rest[i][0].tolist() for i in range(len(rest))] == epoch[5:]
    assert loader.identity() == rest.identity()
    other = tfpipe.SequenceLoader(source, 5, x="id", y="label", seed=8).identity()
    assert loader.identity().differences(other) == [
        "batch_size: saved 5, now 4",
        "seed: saved 8, now 7",
    ]


def test_build_distributed_starts_at_a_global_step() -> None:
    """`start_at(epoch, batch).build_distributed()` gives the batches of a run built from
    `start_at(0)` from that step on, for a Pipeline and a SequenceLoader; a step in the left
    out remainder (42 examples: 5 whole steps of 8) is refused."""
    source = tfpipe.from_arrays({"id": np.arange(42), "label": np.arange(42) % 2})
    pipeline = tfpipe.Pipeline(source).shuffle(seed=3).batch(8).as_supervised("id", "label")
    loader = tfpipe.SequenceLoader(source, 8, x="id", y="label", seed=3)
    for data in (pipeline, loader):
        with pytest.warns(TfpipeWarning, match="2 of 42 examples are left out"):
            whole = data.start_at(0).build_distributed()
            rest = data.start_at(1, 3).build_distributed()
        batches = iter(whole.dataset)
        steps = [next(batches)[0].numpy().tolist() for _ in range(15)]
        for epoch in range(3):
            used = [i for step in steps[epoch * 5 : (epoch + 1) * 5] for i in step]
            assert len(set(used)) == 40, data
        batches = iter(rest.dataset)
        assert [next(batches)[0].numpy().tolist() for _ in range(7)] == steps[8:]
        with pytest.raises(ValueError, match=r"start_at\(batch=5\) is past the last step"):
            data.start_at(0, 5).build_distributed()


def test_a_workers_epochs_are_cut_to_the_steps_every_worker_runs() -> None:
    """An uneven split: of 23 records, worker 0 of 2 holds 12 (6 batches of its share of 2),
    but both run 5 steps. Its part from a position (what build_distributed gives it; white
    box, as one process cannot run two workers) has 5 batches per epoch, the resumed epoch
    included, so the next epoch starts where an uninterrupted run's does."""
    source = tfpipe.from_arrays({"id": np.arange(23)})
    pipeline = tfpipe.Pipeline(source).shuffle(seed=2).batch(4)

    def part(epoch: int, batch: int) -> list[list[int]]:
        worker = pipeline._with(
            shard=(2, 0), batch=(2, True), repeat=None, start=(epoch, batch), epoch_batches=5
        )
        return _ids(worker.build().take(15 - 5 * epoch - batch))

    whole = part(0, 0)
    for epoch in range(3):
        used = [i for batch in whole[epoch * 5 : (epoch + 1) * 5] for i in batch]
        assert len(set(used)) == 10 and set(used) < set(range(0, 23, 2))
    assert part(1, 2) == whole[7:]


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class _Preempted(Exception):
    pass


class _Interrupt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if batch == 6:
            raise _Preempted  # leaves the backup behind, as a preemption would


def _pipeline(count: int = 40, seed: int = 5, batch: int = 4) -> tfpipe.Pipeline:
    ids = np.arange(count, dtype=np.float32)[:, None]
    source = tfpipe.from_arrays({"x": ids, "label": np.arange(count) % 2})
    return tfpipe.Pipeline(source).shuffle(seed=seed).batch(batch).as_supervised("x", "label")


def test_backup_from_other_input_is_refused(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=backup, save_every=3,
                   callbacks=[_Interrupt()], report=False, verbose=0)  # fmt: skip
    saved = json.loads(next(backup.glob("backup-*/position.json")).read_text())
    assert (saved["epoch"], saved["batch"], saved["step"]) == (0, 6, 6)
    for data, difference in [
        (_pipeline(batch=8), "batch_size: saved 4, now 8"),
        (_pipeline(seed=6), "seed: saved 5, now 6"),
        (_pipeline(count=44), "dataset: saved ArraySource of 40 examples, now ArraySource of 44"),
    ]:
        with pytest.raises(SourceError, match=difference) as caught:
            tfpipe.fit(_model(), data, epochs=2, backup_dir=backup, report=False, verbose=0)
        assert "backup-000000000006" in str(caught.value)
    unreadable = tmp_path / "unreadable"
    shutil.copytree(backup, unreadable)
    position = next(unreadable.glob("backup-*/position.json"))
    position.write_text(position.read_text()[:40])
    with pytest.raises(SourceError, match=f"{re.escape(str(position))} cannot be read: JSONDecode"):
        tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=unreadable, report=False, verbose=0)
    history = tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=backup, verbose=0)
    assert len(history.history["loss"]) == 2  # the rest of epoch 0, then epoch 1
    saves = history.report.breakdown["backup saves"]  # after steps 10 and 20: its own line
    assert saves.callback and saves.detail.startswith("2 saves, ") and saves.seconds > 0
    assert not list(backup.iterdir())  # removed once every epoch is trained


def _written(prefix: Path, seed: int) -> tfpipe.Pipeline:
    """40 records of one size each (ids < 128) in 3 shards, shuffled by `seed`, read back."""
    ids = np.arange(40)
    source = tfpipe.from_arrays({"x": ids.astype(np.float32)[:, None], "label": ids % 2})
    tfpipe.write_tfrecords(source, prefix, num_shards=3, seed=seed, progress=False)
    return tfpipe.Pipeline(prefix).shuffle(seed=5).batch(4).as_supervised("x", "label")


@pytest.mark.fault(
    "dataset written again with another seed (same shard names, sizes and counts)",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError: the backup was made with other input (CRC-32C digests differ)",
)
def test_backup_of_other_records_of_the_same_shape_is_refused(tmp_path: Path) -> None:
    prefix, backup = tmp_path / "data" / "train", tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_model(), _written(prefix, seed=0), epochs=2, backup_dir=backup, save_every=3,
                   callbacks=[_Interrupt()], report=False, verbose=0)  # fmt: skip
    before = DatasetInfo.load(prefix).shards
    again = _written(prefix, seed=1)
    after = DatasetInfo.load(prefix).shards
    assert [(s.file, s.num_bytes, s.num_examples) for s in before] == [
        (s.file, s.num_bytes, s.num_examples) for s in after
    ]
    with pytest.raises(SourceError, match="holds other examples than when the backup was saved"):
        tfpipe.fit(_model(), again, epochs=2, backup_dir=backup, report=False, verbose=0)


def test_sequence_loader_identity_tells_records_of_the_same_shape_apart(tmp_path: Path) -> None:
    prefix = tmp_path / "train"

    def identity() -> str:
        source = tfpipe.from_tfrecords(prefix)
        return tfpipe.SequenceLoader(source, 4, x="x", y="label", seed=0).identity().data

    _written(prefix, seed=0)
    first = identity()
    assert identity() == first  # the same records: the same identity
    _written(prefix, seed=1)  # the same shard names, sizes and counts, other records
    assert identity() != first


@pytest.mark.fault(
    "position.json edited by hand (batch 6 -> 2), or without its checksum",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError naming the file: it does not match its checksum",
)
def test_a_position_edited_by_hand_is_refused(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=backup, save_every=3,
                   callbacks=[_Interrupt()], report=False, verbose=0)  # fmt: skip
    position = next(backup.glob("backup-*/position.json"))
    saved = json.loads(position.read_text())
    for edited, problem in [
        ({**saved, "batch": 2}, "does not match its checksum"),
        ({k: v for k, v in saved.items() if k != "checksum"}, "has no checksum"),
    ]:
        position.write_text(json.dumps(edited))
        with pytest.raises(SourceError, match=f"^{re.escape(str(position))} {problem}"):
            tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=backup, report=False, verbose=0)
    position.write_text(json.dumps(saved))
    history = tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=backup, verbose=0)
    assert len(history.history["loss"]) == 2


@pytest.mark.fault(
    "resumed with another optimizer than the backup's",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError naming the backup and both optimizers, before training",
)
def test_backup_with_another_optimizer_is_refused(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_model(), _pipeline(), epochs=2, backup_dir=backup, save_every=3,
                   callbacks=[_Interrupt()], report=False, verbose=0)  # fmt: skip
    saved = json.loads(next(backup.glob("backup-*/position.json")).read_text())
    assert saved["optimizer"].startswith("Adam with ")
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    weights = [w.copy() for w in model.get_weights()]
    with pytest.raises(SourceError) as caught:
        tfpipe.fit(model, _pipeline(), epochs=2, backup_dir=backup, report=False, verbose=0)
    message = str(caught.value)
    assert "backup-000000000006" in message and saved["optimizer"] in message, message
    assert "compiled with SGD with " in message and "drop the optimizer state" in message
    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights(), strict=True))
    assert int(model.optimizer.iterations.numpy()) == 0  # nothing trained
    history = tfpipe.fit(
        _model(), _pipeline(), epochs=2, backup_dir=backup, report=False, verbose=0
    )
    assert len(history.history["loss"]) == 2  # the backup's own optimizer resumes


def _named(*layers: keras.layers.Layer) -> keras.Model:
    model = keras.Sequential([keras.Input((1,)), *layers])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.fault(
    "resumed with a model of another architecture (a layer's units changed, a layer added)",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError naming the layers and weight shapes that differ, before training "
    "(was: the optimizer's variable count)",
)
def test_backup_of_another_architecture_names_the_layers(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_named(keras.layers.Dense(2, name="head")), _pipeline(), epochs=2,
                   backup_dir=backup, save_every=3, callbacks=[_Interrupt()], report=False,
                   verbose=0)  # fmt: skip
    wider = "the backup's model has layer 'head' with kernel (1, 2), bias (2,); this model has "
    deeper = "layer 1 (counting layers with weights): the backup's model has 'head' "
    for layers, messages in [
        ([keras.layers.Dense(3, name="head")], [wider + "kernel (1, 3), bias (3,)"]),
        (
            [keras.layers.Dense(4, name="hidden"), keras.layers.Dense(2, name="head")],
            [
                deeper + "(kernel (1, 2), bias (2,)); this model has 'hidden' (kernel (1, 4), ",
                "this model has layer 'head' (kernel (4, 2), bias (2,)), the backup's model has "
                "none in its place (it has 1 layers with weights, this one 2)",
            ],
        ),
    ]:
        model = _named(*layers)
        with pytest.raises(SourceError) as caught:
            tfpipe.fit(model, _pipeline(), epochs=2, backup_dir=backup, report=False, verbose=0)
        message = str(caught.value)
        assert "backup-000000000006 was saved from a model of another architecture" in message
        assert all(part in message for part in messages), message
        assert "optimizer" not in message and "Build the model as it was" in message
        assert int(model.optimizer.iterations.numpy()) == 0  # nothing trained
    other_names = _named(keras.layers.Dense(2))  # the same architecture, an automatic name
    history = tfpipe.fit(other_names, _pipeline(), epochs=2, backup_dir=backup, verbose=0)
    assert len(history.history["loss"]) == 2


class _InterruptSecondEpoch(_Interrupt):
    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self.epoch == 1:
            super().on_train_batch_end(batch, logs)


@pytest.mark.fault(
    "resumed with fewer epochs than the backup has trained already",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="ValueError naming epochs and the backup's position; model and backups untouched",
)
@pytest.mark.fault(
    "a folder of the user's named backup-old in backup_dir",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="neither read as a backup (was: its missing position.json) nor removed",
)
def test_backup_past_the_epochs_asked_is_refused(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_model(), _pipeline(), epochs=3, backup_dir=backup, save_every=3,
                   callbacks=[_InterruptSecondEpoch()], report=False, verbose=0)  # fmt: skip
    saved = json.loads(next(backup.glob("backup-*/position.json")).read_text())
    assert (saved["epoch"], saved["batch"]) == (1, 5)
    (backup / "backup-old").mkdir()  # a user's folder: neither read as a backup nor removed
    model = _model()
    weights = [w.copy() for w in model.get_weights()]
    message = r"epochs=1, but the backup backup-000000000015 .* 1 epoch\(s\) and 5 batch"
    with pytest.raises(ValueError, match=message + r".*Pass epochs=2 or more"):
        tfpipe.fit(model, _pipeline(), epochs=1, backup_dir=backup, report=False, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights(), strict=True))
    assert sorted(p.name for p in backup.iterdir()) == ["backup-000000000015", "backup-old"]
    history = tfpipe.fit(model, _pipeline(), epochs=2, backup_dir=backup, report=False, verbose=0)
    assert len(history.history["loss"]) == 1
    assert [p.name for p in backup.iterdir()] == ["backup-old"]


def test_backup_needs_a_resumable_input(tmp_path: Path) -> None:
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((8, 1)), np.zeros(8))).batch(4)
    with pytest.raises(ValueError, match="data is a tf\\.data input"):
        tfpipe.fit(_model(), dataset, backup_dir=tmp_path, report=False, verbose=0)
    unseeded = _pipeline().shuffle()
    with pytest.raises(ValueError, match="shuffle\\(\\) has no seed"):
        tfpipe.fit(_model(), unseeded, backup_dir=tmp_path, report=False, verbose=0)
    with pytest.raises(ValueError, match="save_every applies with backup_dir"):
        tfpipe.fit(_model(), _pipeline(), save_every=3, report=False, verbose=0)


def _read_log(path: Path) -> dict[int, list[int]]:
    """Step -> the ids trained at that step (both replicas' halves, sorted, under a strategy)."""
    steps: dict[int, list[int]] = {}
    for line in path.read_text().splitlines():
        step, *ids = (int(part) for part in line.split())
        steps.setdefault(step, []).extend(ids)
    return steps


def _start(
    kind: str, data: Path, backup: Path, log: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        **(env or {}),
    }
    command = [sys.executable, str(RUN), kind, str(data), str(backup), str(log), *extra]
    return subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, stderr = process.communicate(timeout=TIMEOUT_S)
        return process.returncode, stderr
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """Kills the process group of `process` if it still runs."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, Path]]:
    """Runs killed with SIGKILL after batch 7 of epoch 1, all four at once: data, backup, log
    of each kind (and of the folder under a 2-replica MirroredStrategy)."""
    root = tmp_path_factory.mktemp("killed")
    runs, processes = {}, {}
    try:
        for name in (*resume_run.KINDS, "mirrored"):
            kind = "folder" if name == "mirrored" else name
            data = resume_run.make_data(kind, root / name / "data")
            backup, log = root / name / "backup", root / name / "killed.log"
            extra = ["--replicas", "2"] if name == "mirrored" else []
            runs[name] = (data, backup, log)
            processes[name] = _start(kind, data, backup, log, "--kill", "1:7", *extra)
        for name, process in processes.items():
            code, stderr = _finish(process)
            assert code == -signal.SIGKILL, f"{name} ended with {code}: {stderr[-3000:]}"
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    return runs


@pytest.fixture(scope="module")
def reference_log(
    killed: dict[str, tuple[Path, Path, Path]], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], dict[int, list[int]]]:
    """The log of an uninterrupted single-device run over the data of a kind's killed run (in
    this process), made once per kind: the folder's serves its test and the mirrored one's."""
    logs: dict[str, dict[int, list[int]]] = {}

    def reference(kind: str) -> dict[int, list[int]]:
        if kind not in logs:
            root = tmp_path_factory.mktemp(f"reference-{kind}")
            try:
                resume_run.run(kind, killed[kind][0], root / "backup", root / "reference.log")
            finally:
                tf.random.set_seed(None)
            logs[kind] = _read_log(root / "reference.log")
        return logs[kind]

    return reference


def _check_exact_resume(
    killed_log: dict[int, list[int]],
    resumed_log: dict[int, list[int]],
    reference: dict[int, list[int]],
    ordered: bool,
) -> None:
    last = KILL[0] * STEPS + KILL[1]
    assert sorted(reference) == list(range(3 * STEPS))
    assert sorted(killed_log) == list(range(last + 1))
    assert sorted(resumed_log) == list(range(SAVED_STEP, 3 * STEPS))
    same = (lambda a, b: a == b) if ordered else (lambda a, b: sorted(a) == sorted(b))
    for log in (killed_log, resumed_log):  # the batch sequence of the uninterrupted run
        assert all(same(ids, reference[step]) for step, ids in log.items())
    twice = sorted(set(killed_log) & set(resumed_log))
    assert twice == [16, 17]  # the batches after the last save, trained again
    for epoch in range(3):
        steps = range(epoch * STEPS, (epoch + 1) * STEPS)
        seen = collections.Counter(
            i for log in (killed_log, resumed_log) for s in steps for i in log.get(s, [])
        )
        again = collections.Counter(i for s in twice if s in steps for i in reference[s])
        assert seen == collections.Counter(range(40)) + again
        assert sum(again.values()) == (8 if epoch == 1 else 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", resume_run.KINDS)
def test_killed_run_resumes_exactly(
    kind: str,
    killed: dict[str, tuple[Path, Path, Path]],
    reference_log: Callable[[str], dict[int, list[int]]],
    tmp_path: Path,
) -> None:
    data, backup, log = killed[kind]
    saved = json.loads(next(backup.glob("backup-*/position.json")).read_text())
    assert (saved["epoch"], saved["batch"], saved["step"]) == (1, 6, SAVED_STEP)
    try:
        resume_run.run(kind, data, backup, tmp_path / "resumed.log")
    finally:
        tf.random.set_seed(None)
    _check_exact_resume(
        _read_log(log), _read_log(tmp_path / "resumed.log"), reference_log(kind), ordered=True
    )
    assert not list(backup.iterdir())


@pytest.mark.slow
def test_killed_run_resumes_exactly_under_mirrored_strategy(
    killed: dict[str, tuple[Path, Path, Path]],
    reference_log: Callable[[str], dict[int, list[int]]],
    tmp_path: Path,
) -> None:
    """Two CPU replicas: the position counts global batches, so the resumed run still trains
    on every example exactly once per epoch, as the single-device run does."""
    data, backup, log = killed["mirrored"]
    resumed = _start("folder", data, backup, tmp_path / "resumed.log", "--replicas", "2")
    try:
        reference = reference_log("folder")
    finally:
        code, stderr = _finish(resumed)
    assert code == 0, stderr[-3000:]
    _check_exact_resume(
        _read_log(log), _read_log(tmp_path / "resumed.log"), reference, ordered=False
    )


MW_EXAMPLES, MW_BATCH, MW_STEPS = 100, 10, 10  # 2 workers x 5 examples per global step


def _run_workers(
    data: Path, runs: list[list[tuple[Path, Path]]], *extra: str, kind: str = "records"
) -> list[tuple[int, str]]:
    """Runs two MultiWorkerMirroredStrategy workers of resume_run.py on free 127.0.0.1 ports to
    their end, worker i training once per (backup, log) of runs[i], one after the other in the
    same process (`--then`): (exit code, stderr) of each worker; both always stopped."""
    launcher = load("multi_worker")
    ports = [launcher.free_port() for _ in runs]
    processes = []
    try:
        for index, [(backup, log), *then] in enumerate(runs):
            env = {"TF_CONFIG": launcher.tf_config(ports, index), "CUDA_VISIBLE_DEVICES": ""}
            command = ["--multi-worker", "--batch", str(MW_BATCH), *extra]
            command += [str(part) for pair in then for part in ("--then", *pair)]
            processes.append(_start(kind, data, backup, log, *command, env=env))
        return [_finish(process) for process in processes]
    finally:
        for process in processes:
            _stop(process)


def _each_run(stderr: str) -> list[str]:
    """The stderr of each run of a resume_run.py process, up to its `run N: ok|failed` line."""
    return re.findall(r"(?ms).*?^run \d+: (?:ok|failed)$", stderr)


@pytest.mark.slow
@pytest.mark.fault(
    "both workers killed with SIGKILL mid-epoch (2 workers, MultiWorkerMirroredStrategy)",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="restarted, they go on after the last save: each example once per epoch, the "
    "steps after the save trained twice (counted)",
)
@pytest.mark.fault(
    "a backup made by 2 workers restored by 1 process",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError naming the difference (workers: saved 2, now 1)",
)
@pytest.mark.fault(
    "backup_dir not shared: the 2 workers find different newest backups",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError on every worker listing the backup each found; no hang",
)
@pytest.mark.fault(
    "the agreed backup's weights file cut short on one of 2 workers only",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError on every worker naming that worker, the file and its error; no hang",
)
def test_killed_multi_worker_run_resumes_exactly(tmp_path: Path) -> None:
    """Two workers killed with SIGKILL in epoch 1 (the second) after the save at step 16, then
    restarted: per epoch, every example is used exactly once over both workers and both runs,
    except the 2 global steps after the save, trained again on the same worker parts."""
    data = resume_run.make_data("records", tmp_path / "data", MW_EXAMPLES, shards=4)
    backup = tmp_path / "backup"
    killed = [tmp_path / f"killed{w}.log" for w in range(2)]
    ended = _run_workers(data, [[(backup, log)] for log in killed], "--kill", "1:7")
    # Each kills itself after step 17; the slower one may first see its peer's socket close.
    assert any(code == -signal.SIGKILL for code, _ in ended), ended
    for code, stderr in ended:
        lost_peer = code == 1 and "UnavailableError" in stderr
        assert code == -signal.SIGKILL or lost_peer, f"a worker ended with {code}: {stderr[-3000:]}"
    saved = json.loads(next(backup.glob("backup-*/position.json")).read_text())
    assert (saved["epoch"], saved["batch"], saved["step"], saved["workers"]) == (1, 6, 16, 2)
    # Restored by one process: the global batch is the same, the worker count is not.
    try:
        with pytest.raises(SourceError, match=r"Differences: workers: saved 2, now 1 \("):
            resume_run.run("records", data, backup, tmp_path / "one.log", batch_size=MW_BATCH)
    finally:
        tf.random.set_seed(None)
    # Then, each worker one process training 3 times in a row. First worker 1 given another
    # folder: both stop before training, naming what each found. Then worker 1 reads a copy
    # whose weights are cut short: the backup agreed on, its load fails on worker 1 only, and
    # both stop naming its error (worker 0 waited at its first step). Then both resume.
    corrupt = tmp_path / "corrupt"
    shutil.copytree(backup, corrupt)
    weights = next(corrupt.glob("backup-*/model.weights.h5"))
    weights.write_bytes(weights.read_bytes()[:100])
    folders = [[backup, backup, backup], [tmp_path / "other", corrupt, backup]]
    names = ["unshared", "corrupt", "resumed"]
    in_turn = [
        list(zip(folders[w], [tmp_path / f"{name}{w}.log" for name in names], strict=True))
        for w in range(2)
    ]
    for code, stderr in _run_workers(data, in_turn):
        each = _each_run(stderr)
        assert code == 1 and len(each) == 3, stderr[-3000:]
        unshared, corrupted, resumed_run = each
        assert unshared.endswith("run 0: failed") and "SourceError" in unshared, unshared[-3000:]
        assert "(worker 0: backup-000000000016, worker 1: none)" in unshared
        assert corrupted.endswith("run 1: failed"), corrupted[-3000:]
        assert "not every worker could restore the backup" in corrupted, corrupted[-3000:]
        assert f"(worker 1: SourceError: {weights} cannot be loaded: OSError" in corrupted
        assert resumed_run.endswith("run 2: ok"), resumed_run[-3000:]
    assert not list(backup.iterdir())  # removed by the chief when every epoch was trained
    _check_two_workers(killed, [tmp_path / f"resumed{w}.log" for w in range(2)])


def _check_two_workers(killed: list[Path], resumed: list[Path]) -> None:
    """The logs of two workers killed after step 17 and resumed from the save at step 16: per
    epoch, every example once over both workers and both runs, but the 2 steps trained again
    on the same worker parts."""
    runs = [[_read_log(path) for path in paths] for paths in (killed, resumed)]
    for worker in range(2):
        assert sorted(runs[0][worker]) == list(range(KILL[0] * MW_STEPS + KILL[1] + 1))
        assert sorted(runs[1][worker]) == list(range(SAVED_STEP, 3 * MW_STEPS))
        for step in (16, 17):  # the same batches again, on the same worker
            assert runs[1][worker][step] == runs[0][worker][step]
            assert len(runs[0][worker][step]) == MW_BATCH // 2
    for epoch in range(3):
        steps = range(epoch * MW_STEPS, (epoch + 1) * MW_STEPS)
        seen = collections.Counter(
            i for run in runs for log in run for s in steps for i in log.get(s, [])
        )
        again = collections.Counter(
            i for log in runs[0] for s in (16, 17) if s in steps for i in log[s]
        )
        assert seen == collections.Counter(range(MW_EXAMPLES)) + again
        assert sum(again.values()) == (2 * MW_BATCH if epoch == 1 else 0)


@pytest.mark.slow
def test_killed_multi_worker_mixture_resumes_exactly(tmp_path: Path) -> None:
    """A mixture (80 and 20 ids at 4:1, an epoch every id once) over two workers, both killed
    in epoch 1 and restarted: each worker reads its part of each source, so per epoch every
    example is used once over both workers and both runs, but the steps after the save."""
    data = resume_run.make_data("mixture", tmp_path / "data", MW_EXAMPLES, shards=4)
    backup = tmp_path / "backup"
    killed = [tmp_path / f"killed{w}.log" for w in range(2)]
    ended = _run_workers(data, [[(backup, log)] for log in killed], "--kill", "1:7", kind="mixture")
    assert any(code == -signal.SIGKILL for code, _ in ended), ended
    resumed = [tmp_path / f"resumed{w}.log" for w in range(2)]
    for code, stderr in _run_workers(data, [[(backup, log)] for log in resumed], kind="mixture"):
        assert code == 0, stderr[-3000:]
    _check_two_workers(killed, resumed)
