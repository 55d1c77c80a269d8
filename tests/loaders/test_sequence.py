"""tfpipe.SequenceLoader: exactly-once epochs, reshuffles, determinism, Keras fit/evaluate/predict
with threads and processes, multi-output labels, errors from workers, argument checks."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pandas as pd
import PIL.Image
import pytest

import tfpipe
from collection import collect_now
from tfpipe.errors import DecodeError, SchemaError, SourceError, TfpipeError, TfpipeWarning
from tfpipe.loaders.workers import WatchedPool, live_sentinels

COUNT = 22
ID_SCHEMA = tfpipe.Schema(
    {"x": tfpipe.Tensor(shape=(1,)), "id": tfpipe.Tensor(shape=(), dtype="int64")}
)


def id_source() -> tfpipe.sources.ArraySource:
    """22 examples whose target is their own id."""
    return tfpipe.from_arrays(
        {"x": np.arange(COUNT, dtype=np.float32)[:, None], "id": np.arange(COUNT)},
        schema=ID_SCHEMA,
    )


def epoch_ids(loader: tfpipe.SequenceLoader) -> np.ndarray:
    return np.concatenate([loader[i][1] for i in range(len(loader))])


class IdRecorder(keras.Model):
    """A model that records the targets (example ids) of every batch `fit` gives it."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.epochs: list[list[np.ndarray]] = []

    def call(self, x: Any) -> Any:
        return self.dense(x)

    def train_step(self, data: Any) -> dict[str, Any]:
        _, y = data
        self.epochs[-1].append(keras.ops.convert_to_numpy(y))
        return {"examples": len(self.epochs[-1][-1])}


class NewEpoch(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.model.epochs.append([])


def zombie_children() -> list[int]:
    """Child processes of this process that exited but were never reaped."""
    zombies = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == os.getpid():
                zombies.append(int(entry.name))
    return zombies


def test_batches_cover_the_source_with_a_partial_last_batch() -> None:
    loader = tfpipe.SequenceLoader(id_source(), batch_size=4, x="x", y="id", shuffle=False)
    assert len(loader) == 6
    x, y = loader[5]
    assert x.shape == (2, 1) and x.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_array_equal(y, [20, 21])
    np.testing.assert_array_equal(loader[-1][1], y)
    dropped = tfpipe.SequenceLoader(
        id_source(), batch_size=4, x="x", y="id", shuffle=False, drop_remainder=True
    )
    assert len(dropped) == 5 and all(dropped[i][0].shape == (4, 1) for i in range(5))
    with pytest.raises(IndexError, match="batch 6 is out of range"):
        loader[6]


def test_examples_per_epoch_leaves_out_a_dropped_partial_batch() -> None:
    loader = tfpipe.SequenceLoader(id_source(), batch_size=5, x="x", y="id")
    assert loader.examples_per_epoch() == COUNT
    dropped = tfpipe.SequenceLoader(id_source(), batch_size=5, x="x", y="id", drop_remainder=True)
    assert dropped.examples_per_epoch() == len(epoch_ids(dropped)) == 20


def test_every_example_once_per_epoch_in_a_new_order() -> None:
    loader = tfpipe.SequenceLoader(id_source(), batch_size=4, x="x", y="id", seed=7)
    orders = []
    for _ in range(3):
        ids = epoch_ids(loader)
        assert sorted(ids) == list(range(COUNT))
        orders.append(ids.tolist())
        loader.on_epoch_end()
    assert len({tuple(o) for o in orders}) == 3


def test_same_seed_same_orders_and_unshuffled_is_source_order() -> None:
    def orders(seed: int) -> list[list[int]]:
        loader = tfpipe.SequenceLoader(id_source(), batch_size=5, x="x", y="id", seed=seed)
        result = []
        for _ in range(2):
            result.append(epoch_ids(loader).tolist())
            loader.on_epoch_end()
        return result

    assert orders(1) == orders(1)
    assert orders(1) != orders(2)
    plain = tfpipe.SequenceLoader(id_source(), batch_size=5, x="x", y="id", shuffle=False)
    plain.on_epoch_end()
    assert epoch_ids(plain).tolist() == list(range(COUNT))


@pytest.mark.parametrize(
    "workers, processes",
    [(1, False), (2, False), pytest.param(2, True, marks=pytest.mark.slow)],
    ids=["main-thread", "2-threads", "2-processes"],
)
def test_fit_sees_every_example_once_per_epoch(workers: int, processes: bool) -> None:
    loader = tfpipe.SequenceLoader(
        id_source(), batch_size=4, x="x", y="id", seed=0, workers=workers,
        use_multiprocessing=processes,
    )  # fmt: skip
    model = IdRecorder()
    model.compile(run_eagerly=True)
    model.fit(loader, epochs=3, verbose=0, shuffle=False, callbacks=[NewEpoch()])
    orders = [np.concatenate(batches).tolist() for batches in model.epochs]
    assert len(orders) == 3
    for order in orders:
        assert sorted(order) == list(range(COUNT))
    assert len({tuple(o) for o in orders}) == 3
    if processes:
        collect_now()
        multiprocessing.active_children()
        assert zombie_children() == []


def test_batches_loaded_between_epochs_are_those_of_the_next_epoch() -> None:
    """With worker threads, the first batches of the next epoch are loaded while Keras stops
    and restarts its threads: whatever batch order fit asks in (shuffle=True), each epoch
    holds the batches it holds when loaded in the main thread, each once."""
    threads = set()

    def note_thread(example: dict[str, np.ndarray], rng: np.random.Generator) -> Any:
        threads.add(threading.current_thread().name)
        return example

    def epochs(workers: int) -> list[list[list[int]]]:
        loader = tfpipe.SequenceLoader(
            id_source(), batch_size=4, x="x", y="id", seed=0, workers=workers,
            max_queue_size=2, transform=note_thread,
        )  # fmt: skip
        model = IdRecorder()
        model.compile(run_eagerly=True)
        model.fit(loader, epochs=3, verbose=0, shuffle=True, callbacks=[NewEpoch()])
        return [sorted(batch.tolist() for batch in batches) for batches in model.epochs]

    in_main_thread = epochs(1)
    assert not any(name.startswith("tfpipe-read-ahead") for name in threads)
    assert epochs(2) == in_main_thread
    assert any(name.startswith("tfpipe-read-ahead") for name in threads)


def test_batches_loaded_between_epochs_are_the_first_ones_fit_asks_for() -> None:
    """fit(shuffle=True) asks for an epoch's batches in a new random order (Keras's enqueuer
    shuffles them with Python's `random`): the batches loaded between epochs are the first
    two it asks for, not batches 0 and 1, which it asks for anywhere in the epoch."""
    ahead: list[int] = []  # example ids loaded in the read-ahead threads, in time order
    lock = threading.Lock()

    def note(example: dict[str, np.ndarray], rng: np.random.Generator) -> Any:
        if threading.current_thread().name.startswith("tfpipe-read-ahead"):
            with lock:
                ahead.append(int(example["id"]))
        return example

    loader = tfpipe.SequenceLoader(
        id_source(), batch_size=2, x="x", y="id", seed=0, workers=2, max_queue_size=2,
        transform=note,
    )  # fmt: skip
    model = IdRecorder()
    model.compile(run_eagerly=True)
    model.fit(loader, epochs=3, verbose=0, callbacks=[NewEpoch()])
    first_two = [np.concatenate(model.epochs[epoch][:2]).tolist() for epoch in (1, 2)]
    assert sorted(ahead[:4]) == sorted(first_two[0])
    assert sorted(ahead[4:8]) == sorted(first_two[1])
    assert len(model.epochs[1]) == len(loader) == 11


SPAWNED_LOADER = """
import multiprocessing, sys
import numpy as np

def batch(folder, queue):
    import tfpipe
    loader = tfpipe.SequenceLoader(tfpipe.from_directory(folder), batch_size=8,
                                   image_size=(20, 24), shuffle=False, dtype="uint8", rescale=None)
    queue.put(loader[1][0].tobytes())

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=batch, args=(sys.argv[1], queue))
    child.start()
    sys.stdout.buffer.write(queue.get(timeout=120))
    child.join(30)
"""


@pytest.mark.slow
def test_a_spawned_process_decodes_with_the_graph_as_any_other(tmp_path: Path) -> None:
    """A loader in a process started by multiprocessing (a benchmark's, a search's worker) is
    not a forked Keras worker: it decodes with the same graph, to the same pixels (it once took
    the Pillow fallback there, within 1/255 and at twice the CPU per photo)."""
    rng = np.random.default_rng(0)
    image_folder = tmp_path / "noise"
    for name in ("a", "b"):
        (image_folder / name).mkdir(parents=True)
        for i in range(8):
            pixels = rng.integers(0, 256, (150, 170, 3), dtype=np.uint8)
            PIL.Image.fromarray(pixels).save(image_folder / name / f"{i}.jpg", quality=85)
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED_LOADER)
    done = subprocess.run(
        [sys.executable, str(script), str(image_folder)], capture_output=True, timeout=240
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    loader = tfpipe.SequenceLoader(
        tfpipe.from_directory(image_folder), batch_size=8, image_size=(20, 24), shuffle=False,
        dtype="uint8", rescale=None,
    )  # fmt: skip
    here = loader[1][0]
    np.testing.assert_array_equal(np.frombuffer(done.stdout, np.uint8).reshape(here.shape), here)


def test_images_are_decoded_resized_and_rescaled(image_folder: Path) -> None:
    source = tfpipe.from_directory(image_folder)
    loader = tfpipe.SequenceLoader(source, batch_size=8, image_size=(20, 24), shuffle=False)
    images, labels = loader[1]
    assert images.shape == (8, 20, 24, 3) and images.dtype == np.float32
    assert images.min() >= 0.0 and images.max() <= 1.0
    expected = source.schema["image"].load(source[9]["image"], size=(20, 24))
    np.testing.assert_allclose(images[1], expected / 255, rtol=1e-6)
    np.testing.assert_array_equal(labels, source.labels()[8:16])
    raw = tfpipe.SequenceLoader(
        source, batch_size=8, image_size=(20, 24), shuffle=False, dtype="uint8", rescale=None
    )
    np.testing.assert_array_equal(raw[1][0][1], expected)


@pytest.mark.parametrize(
    ("dtype", "rescale"), [("float32", 1 / 255), ("float32", None), ("uint8", None)]
)
def test_batches_made_by_the_decode_graph_equal_those_filled_in_numpy(
    image_folder: Path, dtype: str, rescale: float | None
) -> None:
    """Without a transform the decode graph makes the image batches (float32 times rescale, or
    uint8); with one they are filled from uint8 pixels in numpy. The same values either way,
    in writable arrays aligned to 64 bytes (TensorFlow takes those without a copy)."""
    source = tfpipe.from_directory(image_folder)
    options: dict[str, Any] = {
        "batch_size": 8, "image_size": (20, 24), "shuffle": False, "dtype": dtype,
        "rescale": rescale,
    }  # fmt: skip
    graph = tfpipe.SequenceLoader(source, **options)
    numpy = tfpipe.SequenceLoader(source, transform=lambda example, rng: example, **options)
    for index in range(len(graph)):
        for made, filled in zip(graph[index], numpy[index], strict=True):
            assert made.dtype == filled.dtype
            np.testing.assert_array_equal(made, filled)
            for batch in (made, filled):
                assert batch.flags.writeable and batch.ctypes.data % 64 == 0


def test_multi_output_labels_from_dataframe_cells(tmp_path: Path, image_folder: Path) -> None:
    paths = sorted(str(p.relative_to(image_folder)) for p in image_folder.glob("*/*.jpg"))[:6]
    df = pd.DataFrame(
        {
            "path": paths,
            "weather": ["clear", "haze", "clear", "rain", "haze", "clear"],
            "ground": ["[1, 0, 3]", "[2]", "[]", "[0, 1]", "[3]", "[1, 2]"],
        }
    )
    source = tfpipe.from_dataframe(df, label_cols=["weather", "ground"], base_dir=image_folder)
    loader = tfpipe.SequenceLoader(
        source, batch_size=4, y=["weather", "ground"], image_size=(16, 16), shuffle=False
    )
    _, (weather, ground) = loader[0]
    np.testing.assert_array_equal(weather, [0, 1, 0, 2])
    assert ground.dtype == np.float32 and ground.shape == (4, 4)
    np.testing.assert_array_equal(ground[0], [1, 1, 0, 1])
    np.testing.assert_array_equal(ground[2], [0, 0, 0, 0])

    inputs = keras.Input((16, 16, 3))
    features = keras.layers.GlobalAveragePooling2D()(inputs)
    model = keras.Model(
        inputs,
        [keras.layers.Dense(3)(features), keras.layers.Dense(4, activation="sigmoid")(features)],
    )
    model.compile(
        "adam",
        [keras.losses.SparseCategoricalCrossentropy(from_logits=True), "binary_crossentropy"],
    )
    history = model.fit(loader, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    named = tfpipe.SequenceLoader(
        source, batch_size=4, x={"pixels": "image"}, y={"w": "weather"}, image_size=(16, 16)
    )
    x, y = named[0]
    assert set(x) == {"pixels"} and y["w"].shape == (4,)


@pytest.mark.slow
def test_fit_evaluate_predict_on_a_tiny_model(image_folder: Path) -> None:
    source = tfpipe.from_directory(image_folder)
    train = tfpipe.SequenceLoader(source, batch_size=8, image_size=(16, 16), seed=0, workers=2)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3),
        ]
    )
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    model.fit(train, epochs=2, verbose=0)
    loss, accuracy = model.evaluate(
        tfpipe.SequenceLoader(source, batch_size=8, image_size=(16, 16), shuffle=False), verbose=0
    )
    assert np.isfinite(loss) and 0 <= accuracy <= 1
    predict = tfpipe.SequenceLoader(
        source, batch_size=8, y=None, image_size=(16, 16), shuffle=False
    )
    predictions = model.predict(predict, verbose=0)
    assert predictions.shape == (len(source), 3)
    last = source.schema["image"].load(source[len(source) - 1]["image"], size=(16, 16))
    np.testing.assert_allclose(
        predictions[-1], model(last[None].astype("float32") / 255)[0], rtol=1e-4, atol=1e-5
    )


def test_transform_is_reproducible_per_example() -> None:
    def jitter(example: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, Any]:
        return {**example, "x": example["x"] + rng.normal(size=1).astype(np.float32)}

    def first_epochs(workers: int) -> list[np.ndarray]:
        loader = tfpipe.SequenceLoader(
            id_source(), batch_size=4, x="x", y="id", seed=5, transform=jitter, workers=workers
        )
        result = []
        for _ in range(2):
            result.append(np.concatenate([loader[i][0] for i in range(len(loader))]))
            loader.on_epoch_end()
        return result

    one, again = first_epochs(1), first_epochs(2)
    np.testing.assert_array_equal(one[0], again[0])
    np.testing.assert_array_equal(one[1], again[1])
    loader = tfpipe.SequenceLoader(id_source(), batch_size=4, x="x", y="id", shuffle=False)
    noise = one[0][:, 0] - np.concatenate([loader[i][0] for i in range(len(loader))])[:, 0]
    assert len(np.unique(np.round(noise, 5))) > COUNT // 2


def test_transform_returning_a_wrong_shape_names_the_example() -> None:
    loader = tfpipe.SequenceLoader(
        id_source(), batch_size=4, x="x", y="id", shuffle=False,
        transform=lambda example, rng: {**example, "x": np.zeros(3)},
    )  # fmt: skip
    with pytest.raises(DecodeError, match=r"x: expected shape \(1,\), got \(3,\) in exam"):
        loader[0]


@pytest.fixture
def folder_with_corrupt_image(tmp_path: Path, image_folder: Path) -> tuple[Path, Path]:
    root = shutil.copytree(image_folder, tmp_path / "images")
    corrupt = sorted(root.glob("square/*.jpg"))[3]
    corrupt.write_bytes(b"\xff\xd8\xff this is not a JPEG")
    return root, corrupt


def test_corrupt_image_error_names_the_file(folder_with_corrupt_image: tuple[Path, Path]) -> None:
    root, corrupt = folder_with_corrupt_image
    loader = tfpipe.SequenceLoader(
        tfpipe.from_directory(root), batch_size=4, image_size=(16, 16), shuffle=False
    )
    with pytest.raises(DecodeError, match=rf"image: .* in {corrupt}"):
        [loader[i] for i in range(len(loader))]


@pytest.mark.parametrize(
    "workers, processes",
    [(2, False), pytest.param(2, True, marks=pytest.mark.slow)],
    ids=["threads", "processes"],
)
def test_corrupt_image_in_a_worker_stops_fit_with_the_path(
    folder_with_corrupt_image: tuple[Path, Path], workers: int, processes: bool
) -> None:
    root, corrupt = folder_with_corrupt_image
    loader = tfpipe.SequenceLoader(
        tfpipe.from_directory(root), batch_size=4, image_size=(16, 16), seed=0,
        workers=workers, use_multiprocessing=processes,
    )  # fmt: skip
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(Exception, match=str(corrupt)):
        model.fit(loader, epochs=1, verbose=0)


_KILLED_WORKER_FIT = """
import gc, multiprocessing, os, signal, sys
import keras, numpy as np, tfpipe

class KilledOnce:
    # Example 21 SIGKILLs the worker process loading it, as the out-of-memory killer would.
    schema = tfpipe.Schema(
        {"x": tfpipe.Tensor(shape=(1,)), "id": tfpipe.Tensor(shape=(), dtype="int64")}
    )
    def __len__(self):
        return 40
    def __getitem__(self, i):
        if multiprocessing.parent_process() is not None:  # a worker, not the main process
            open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
            if i == 21:
                os.kill(os.getpid(), signal.SIGKILL)
        return {"x": np.float32([i]), "id": np.int64(i)}

def train(fit):
    loader = tfpipe.SequenceLoader(KilledOnce(), batch_size=4, x="x", y="id", shuffle=False,
                                   workers=2, use_multiprocessing=True)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    try:
        fit(model, loader)
    except Exception as e:
        print("RAISED", type(e).__name__, str(e).replace(chr(10), " "))
    else:
        print("FINISHED")
    gc.collect()
    print("CHILDREN", len(multiprocessing.active_children()))

train(lambda model, loader: model.fit(loader, epochs=2, verbose=0))
train(lambda model, loader: tfpipe.fit(model, loader, epochs=2, verbose=0, report=False))
"""


@pytest.mark.slow
@pytest.mark.fault(
    "worker process killed by SIGKILL (OOM killer)",
    reader="SequenceLoader (model.fit, tfpipe.fit)",
    outcome="TfpipeError naming the pid and signal; no hang, no process left",
)
def test_killed_worker_process_stops_fit_with_an_error(tmp_path: Path) -> None:
    script = tmp_path / "killed_worker_fit.py"
    script.write_text(_KILLED_WORKER_FIT)
    pids = tmp_path / "pids"
    pids.mkdir()
    run = subprocess.run(
        [sys.executable, str(script), str(pids)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    raised = [line for line in lines if line.startswith(("RAISED", "FINISHED"))]
    assert len(raised) == 2, run.stdout
    workers = {int(p.name) for p in pids.iterdir()}
    for line in raised:  # model.fit, then tfpipe.fit
        found = re.search(
            r"TfpipeError: PyDataset worker process (\d+) was killed by SIGKILL", line
        )
        assert found, line
        assert int(found.group(1)) in workers
        assert "out-of-memory killer" in line and "use_multiprocessing=False" in line
    assert [line for line in lines if line.startswith("CHILDREN")] == ["CHILDREN 0"] * 2
    for pid in workers:  # no orphan outlived the training process
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_watched_pool_fails_pending_results_when_a_worker_dies() -> None:
    with WatchedPool(2) as pool:
        assert pool.apply_async(abs, (-3,)).get(timeout=20) == 3
        pending = [pool.apply_async(time.sleep, (0.2,)) for _ in range(2)]
        with pytest.raises(TfpipeError, match=r"killed by SIGKILL \(exit code -9\)"):
            pool.apply_async(_killed).get(timeout=20)
        for result in pending:
            result.wait(timeout=20)
            assert result.ready()
        with pytest.raises(TfpipeError, match="worker process"):
            pool.apply_async(abs, (-3,)).get(timeout=20)  # the pool stays broken


def test_watched_pool_names_an_exit_code_that_is_not_a_signal() -> None:
    with WatchedPool(1) as pool, pytest.raises(TfpipeError, match="exited with code 3"):
        pool.apply_async(os._exit, (3,)).get(timeout=20)


def test_watched_pool_without_deaths_behaves_like_a_pool() -> None:
    pool = WatchedPool(2)
    assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]
    pool.close()
    pool.join()
    pool.terminate()
    # A worker the pool registered but has not started yet is not waited on (nor an error).
    assert live_sentinels([multiprocessing.Process(target=abs, args=(1,))]) == []


def test_loader_pickles_small_and_the_same() -> None:
    source = tfpipe.from_arrays(
        {"x": np.zeros((5000, 1), np.float32), "id": np.arange(5000)}, schema=ID_SCHEMA
    )
    loader = tfpipe.SequenceLoader(source, batch_size=16, x="x", y="id", seed=3)
    loader.on_epoch_end()
    first = loader[0][1]
    clone = pickle.loads(pickle.dumps(loader))
    np.testing.assert_array_equal(clone[0][1], first)
    assert len(pickle.dumps(loader)) < 2 * len(pickle.dumps(source))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"batch_size": 0}, ValueError, r"batch_size must be a positive int\. Received: batch_si"),
        ({"x": "pixels"}, SchemaError, r"x: feature 'pixels' is not in the schema"),
        ({"y": ["id", "nope"]}, SchemaError, r"y: feature 'nope' is not in the schema"),
        ({"image_size": (16,)}, ValueError, r"image_size must be \(height, width\).*\(16,\)"),
        ({"image_size": (16, 0)}, ValueError, r"image_size must be \(height, width\)"),
        ({"workers": 0}, ValueError, r"workers must be a positive int"),
        ({"dtype": "uint8"}, ValueError, r"rescale needs a float dtype; pass rescale=None"),
        ({"dtype": "str"}, ValueError, r"dtype must be a float or integer dtype"),
        ({"x": None}, ValueError, r"x must name the model input"),
        ({"x": 3}, ValueError, r"x must be a feature name"),
        ({"seed": -1}, ValueError, r"seed must be a non-negative int"),
        ({"batch_size": 64, "drop_remainder": True}, SourceError, r"fewer than batch_si"),
        ({"batch_size": True}, ValueError, r"Received: batch_size=True"),
        ({"batch_size": 4.0}, ValueError, r"Received: batch_size=4\.0"),
        ({"max_queue_size": 0}, ValueError, r"Received: max_queue_size=0"),
        ({"seed": True}, ValueError, r"Received: seed=True"),
        ({"image_size": (16.0, 16)}, ValueError, r"image_size=\(16\.0, 16\)"),
        ({"rescale": True}, ValueError, r"rescale must be a finite number > 0 or None\. Rec"),
        ({"rescale": float("nan")}, ValueError, r"Received: rescale=nan"),
        ({"rescale": float("-inf")}, ValueError, r"Received: rescale=-inf"),
        ({"rescale": 0.0}, ValueError, r"Received: rescale=0\.0"),
        ({"rescale": -1.0}, ValueError, r"Received: rescale=-1\.0"),
    ],
)
@pytest.mark.fault(
    "bool, NaN, inf, 0 or negative numeric argument",
    reader="SequenceLoader",
    outcome="ValueError naming the argument and the value",
)
def test_bad_arguments_give_clear_errors(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    options = {"x": "x", "y": "id", **kwargs}
    with pytest.raises(error, match=match):
        tfpipe.SequenceLoader(id_source(), **options)


def test_images_without_a_size_need_image_size(image_folder: Path) -> None:
    with pytest.raises(SchemaError, match=r"image: .*pass image_size=\(height, width\)"):
        tfpipe.SequenceLoader(tfpipe.from_directory(image_folder))
    with pytest.warns(TfpipeWarning, match=r"image_size=\(8, 8\) is ignored"):
        tfpipe.SequenceLoader(id_source(), x="x", y="id", image_size=(8, 8))
