"""SequenceLoader against a hand-written blog-style `keras.utils.Sequence`, the way fit reads them.

Dataset: 256x256 JPEGs in class folders (4,000 of them; 200 with TFPIPE_BENCH_QUICK=1), loaded
to 128x128 float32 batches of 64 in [0, 1], and the same images as uncompressed TFRecords of the
original JPEG bytes.

Every loader is consumed through Keras's own `PyDatasetAdapter(...).get_tf_dataset()`, which is
exactly what `model.fit` iterates for a PyDataset (a `from_generator` dataset in a tf.data
thread, with Keras's enqueuer when workers > 1). Running that dataset without a model measures
the input alone, so the ratios are not diluted by training compute, while keeping the adapter's
costs that a bare Python loop would hide (see ../shared/PERFORMANCE.md).

The baseline is what blog posts show, honestly tuned: PIL open + convert + resize (bilinear, as
tfpipe uses) + float32 /255 per image, `np.stack`, workers=1, and an `on_epoch_end` reshuffle
that is actually used. Goals (issue 3): workers=1 >= 2x the baseline, 2 threads >= 3x, TFRecords
at least as fast as the folder. Both read the same JPEG bytes and are decode-bound, so the last
goal is a comparison of near-equals on a machine whose speed drifts by ±10% between runs. It is
judged batch by batch (`batch_by_batch`): one PyDataset serves the two loaders' batches in
turn through the adapter, so both see the same moment of the machine, with the page cache warm
(the dataset fits in memory) and cold (it does not). The ratio of the two fresh-process runs of
each repeat (5 repeats) is given too; it still carries the drift between processes.
`workers_peak_rss_mb` is the largest worker process's peak memory with use_multiprocessing=True.

Table "sequence_vs_pipeline" (issue 43): `SequenceLoader(workers=2)` against `tfpipe.Pipeline`
on the same folder (its defaults: shuffle, batch, repeat), 5 repeats, each loader read for 3
epochs as `model.fit` reads it (the Sequence as Keras's `EpochIterator` reads it: the
adapter's dataset made once with fit's default `shuffle=True`, so batches are asked for in a
new random order every epoch, a new iterator of it every epoch, read for `len(loader)` batches,
the adapter begun and ended around it; the Pipeline's dataset as built), 150 batches timed
after 10. (Until issue 43 the Sequence case made a new adapter dataset every epoch, which
`fit` does not: 16-130 ms of `from_generator` set-up per ~0.75 s epoch.) Ratios of
the medians and run by run (the two runs of a repeat), with the range of each measure and the
CPU time of the process per image, which a busy machine disturbs least. Goal: >= 0.9.
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, run_isolated, scale

BATCH_SIZE = 64
IMAGE_SIZE = (128, 128)
NUM_CLASSES = 5
CAN_EVICT = hasattr(os, "posix_fadvise")  # Linux; not on macOS or Windows


def _consume(loader: Any) -> dict[str, Any]:
    """Times batches of a PyDataset read through Keras's adapter, as model.fit reads them."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    from tfpipe.training.throughput import measure

    adapter = PyDatasetAdapter(loader, shuffle=False)
    adapter.on_epoch_begin()
    try:
        result = measure(adapter.get_tf_dataset(), num_batches=scale(50, 6), warmup=scale(5, 2))
    finally:
        adapter.on_epoch_end()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "examples_per_s": result.examples_per_s,
        "batches": result.batches,
        "first_batch_s": result.first_batch_s,
        "workers_peak_rss_mb": children,
    }


def _fit_like(batches: Any) -> dict[str, Any]:
    """Times 150 batches after 10 (6 after 2 when quick), with the process's CPU time."""
    from tfpipe.training.throughput import measure

    result = measure(batches, num_batches=scale(150, 6), warmup=scale(10, 2))
    return {
        "examples_per_s": result.examples_per_s,
        "cores": result.cpu_s / (result.examples / result.examples_per_s),
        "cpu_ms_per_image": result.cpu_s * 1000 / result.examples,
    }


def sequence_epochs(path: str, kind: str, shuffle: bool = True) -> dict[str, Any]:
    """SequenceLoader(workers=2) epoch after epoch, as `model.fit` reads a PyDataset (Keras's
    `EpochIterator`): the adapter's dataset made once (with `fit`'s default `shuffle=True`, the
    batches asked for in a new random order every epoch), then every epoch the adapter begun,
    a new iterator of that dataset, `len(loader)` batches of it (the iterator is left there,
    not run to its end) and the adapter ended."""
    import itertools

    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    import tfpipe

    source = tfpipe.from_directory(path) if kind == "folder" else tfpipe.from_tfrecords(path)
    loader = tfpipe.SequenceLoader(
        source, batch_size=BATCH_SIZE, image_size=IMAGE_SIZE, seed=0, workers=2
    )
    adapter = PyDatasetAdapter(loader, shuffle=shuffle)
    dataset = adapter.get_tf_dataset()

    def epochs() -> Any:
        while True:
            adapter.on_epoch_begin()
            yield from itertools.islice(iter(dataset), len(loader))
            adapter.on_epoch_end()

    return _fit_like(epochs())


def pipeline_epochs(root: str) -> dict[str, Any]:
    """`tfpipe.Pipeline` over the folder with its defaults, as in bench_pipeline."""
    import tfpipe

    pipeline = tfpipe.Pipeline(tfpipe.from_directory(root), image_size=IMAGE_SIZE, rescale=1 / 255)
    return _fit_like(
        pipeline.shuffle().repeat().batch(BATCH_SIZE).as_supervised("image", "label").build()
    )


def blog_sequence(root: str) -> dict[str, Any]:
    """The hand-written baseline: a blog-style Sequence, one PIL image at a time."""
    import keras
    import numpy as np
    from PIL import Image

    class BlogSequence(keras.utils.PyDataset):
        def __init__(self, paths: list[str], labels: np.ndarray, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.paths, self.labels = paths, labels
            self.indices = np.arange(len(paths))

        def __len__(self) -> int:
            return math.ceil(len(self.paths) / BATCH_SIZE)

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            batch = self.indices[index * BATCH_SIZE : (index + 1) * BATCH_SIZE]
            images = [
                np.asarray(
                    Image.open(self.paths[i])
                    .convert("RGB")
                    .resize(IMAGE_SIZE[::-1], Image.Resampling.BILINEAR),
                    np.float32,
                )
                / np.float32(255)
                for i in batch
            ]
            return np.stack(images), self.labels[batch]

        def on_epoch_end(self) -> None:
            np.random.shuffle(self.indices)

    folders = sorted(p for p in Path(root).iterdir() if p.is_dir())
    paths = [(str(f), label) for label, d in enumerate(folders) for f in sorted(d.glob("*.jpg"))]
    sequence = BlogSequence([p for p, _ in paths], np.asarray([label for _, label in paths]))
    sequence.on_epoch_end()
    return _consume(sequence)


def sequence_loader(path: str, kind: str, workers: int, processes: bool) -> dict[str, Any]:
    """tfpipe.SequenceLoader over the folder or the indexed TFRecords."""
    import tfpipe

    source = tfpipe.from_directory(path) if kind == "folder" else tfpipe.from_tfrecords(path)
    loader = tfpipe.SequenceLoader(
        source,
        batch_size=BATCH_SIZE,
        image_size=IMAGE_SIZE,
        seed=0,
        workers=workers,
        use_multiprocessing=processes,
    )
    return _consume(loader)


def _evict(root: str) -> None:
    """Drops a dataset's files from the page cache, as for a dataset larger than memory."""
    for path in Path(root).rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def batch_by_batch(folder: str, records: str, workers: int, cold: bool) -> dict[str, Any]:
    """TFRecords / folder, the two loaders serving alternate batches of one Keras PyDataset.

    Keras's adapter consumes one stream that takes batch k from the folder loader and batch k
    from the TFRecords loader in turn (which comes first alternates too), with `workers`
    threads; the seconds each loader spends in `__getitem__` are summed per epoch. Both see the
    same moment of the machine, so its drift cancels, and the adapter's own cost, the same for
    both, does not dilute the ratio. `cold`: both datasets are dropped from the page cache
    before every epoch, as when the dataset is larger than memory.
    """
    import statistics
    import threading
    import time

    import keras

    import tfpipe

    loaders = [
        tfpipe.SequenceLoader(source, batch_size=BATCH_SIZE, image_size=IMAGE_SIZE, seed=0)
        for source in (tfpipe.from_directory(folder), tfpipe.from_tfrecords(records))
    ]

    class Alternating(keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__(workers=workers)
            self.seconds = [0.0, 0.0]
            self.lock = threading.Lock()

        def __len__(self) -> int:
            return 2 * len(loaders[0])

        def __getitem__(self, index: int) -> Any:
            which = (index + index // 2) % 2  # folder, TFRecords, TFRecords, folder, ...
            start = time.perf_counter()
            batch = loaders[which][index // 2]
            with self.lock:
                self.seconds[which] += time.perf_counter() - start
            return batch

        def on_epoch_end(self) -> None:
            for loader in loaders:
                loader.on_epoch_end()

    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    stream = Alternating()
    adapter = PyDatasetAdapter(stream, shuffle=False)
    ratios = []
    for _ in range(scale(4, 2)):
        if cold:
            _evict(folder)
            _evict(str(Path(records).parent))
        stream.seconds = [0.0, 0.0]
        adapter.on_epoch_begin()
        for _batch in adapter.get_tf_dataset():
            pass
        adapter.on_epoch_end()
        folder_s, records_s = stream.seconds
        ratios.append(folder_s / records_s)
    return {"ratios": ratios, "median": statistics.median(ratios)}


def main() -> None:
    from tfpipe import from_directory, from_tfrecords, write_tfrecords
    from tfpipe.sources.synthetic import make_image_folder

    work = Path(tempfile.mkdtemp(prefix="tfpipe-bench-sequence-"))
    try:
        per_class = scale(800, 40)
        root = make_image_folder(
            work / "images", num_classes=NUM_CLASSES, per_class=per_class, size=(256, 256)
        )
        prefix = work / "records" / "train"
        write_tfrecords(from_directory(root), prefix, num_shards=4, progress=False)
        from_tfrecords(prefix)  # build the index once, outside the timed cases
        folder, records = str(root), str(prefix)
        caches = ["warm page cache"] + (["cold page cache"] if CAN_EVICT else [])
        alternating = {
            f"{cache}, {label}": run_isolated(
                batch_by_batch, folder, records, workers, cache == "cold page cache"
            )
            for cache in caches
            for label, workers in (("workers=1", 1), ("2 threads", 2))
        }
        if not CAN_EVICT:
            print("no os.posix_fadvise on this platform: the cold page cache cases are skipped")
        report = compare(
            "sequence",
            {
                "blog-style Sequence (PIL, workers=1)": (blog_sequence, (folder,)),
                "SequenceLoader folder, workers=1": (sequence_loader, (folder, "folder", 1, False)),
                "SequenceLoader folder, 2 threads": (sequence_loader, (folder, "folder", 2, False)),
                "SequenceLoader TFRecords, workers=1": (
                    sequence_loader,
                    (records, "tfrecords", 1, False),
                ),
                "SequenceLoader TFRecords, 2 threads": (
                    sequence_loader,
                    (records, "tfrecords", 2, False),
                ),
                "SequenceLoader folder, 2 processes": (
                    sequence_loader,
                    (folder, "folder", 2, True),
                ),
            },
            baseline="blog-style Sequence (PIL, workers=1)",
            goals={
                "SequenceLoader folder, workers=1": 2.0,
                "SequenceLoader folder, 2 threads": 3.0,
            },
            pairs={
                "SequenceLoader TFRecords, workers=1": "SequenceLoader folder, workers=1",
                "SequenceLoader TFRecords, 2 threads": "SequenceLoader folder, 2 threads",
            },
            repeats=5,
            extra={
                "images": NUM_CLASSES * per_class,
                "stored_size": [256, 256],
                "image_size": list(IMAGE_SIZE),
                "batch_size": BATCH_SIZE,
                "consumed_through": "keras PyDatasetAdapter.get_tf_dataset()",
                "tfrecords_over_folder_batch_by_batch": alternating,
            },
        )
        for row in report["rows"]:
            if "paired_ratio" in row:
                met = "met" if row["paired_ratio"] >= 1.0 else "MISSED"
                print(f"{row['case']}: goal >= 1.00 of the folder, run by run: {met}")
        for label, result in alternating.items():
            each = ", ".join(f"{r:.3f}" for r in result["ratios"])
            met = "met" if result["median"] >= 1.0 else "MISSED"
            print(
                f"TFRecords / folder, batch by batch, {label}, each epoch: {each}; "
                f"median {result['median']:.3f}, goal >= 1.00 {met}"
            )
        processes = next(r for r in report["rows"] if r["case"].endswith("2 processes"))
        workers_mb = max(run["workers_peak_rss_mb"] for run in processes["runs"])
        print(
            f"use_multiprocessing=True: main process peak {processes['peak_rss_mb']:.0f} MB, "
            f"largest worker peak {workers_mb:.0f} MB"
        )
        compare(
            "sequence_vs_pipeline",
            {
                "Pipeline folder": (pipeline_epochs, (folder,)),
                "SequenceLoader folder, 2 threads": (sequence_epochs, (folder, "folder")),
                "SequenceLoader TFRecords, 2 threads": (sequence_epochs, (records, "tfrecords")),
            },
            baseline="Pipeline folder",
            goals={"SequenceLoader folder, 2 threads": 0.9},
            pairs={
                "SequenceLoader folder, 2 threads": "Pipeline folder",
                "SequenceLoader TFRecords, 2 threads": "Pipeline folder",
            },
            repeats=5,
            spreads=("cores", "cpu_ms_per_image"),
            extra={
                "images": NUM_CLASSES * per_class,
                "image_size": list(IMAGE_SIZE),
                "batch_size": BATCH_SIZE,
                "load_average_at_start": list(os.getloadavg()),
            },
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
