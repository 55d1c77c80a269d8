"""Real photographs of mixed sizes: tfpipe against Keras, hand-written tf.data, Grain and DALI.

Issue 23 ("Fast on real photos"). Two folders, every case run on each: "photos",
`benchmarks.photos.build_photo_folder`: 2,000 JPEGs (quality 90, 300-1,200 px a side, about a
fifth one-channel) cut from the photographs scikit-image ships; and "photos_color" (issue 43),
`build_color_photo_folder`: 2,000 colour-only JPEGs of 300-900 px cut from scikit-learn's and
scikit-image's colour photos; both in 10 class folders, 300 images each with
TFPIPE_BENCH_QUICK=1. Every case decodes them to float32 in [0, 1] of 128x128 (tables
"photos_128", "photos_color_128") and of 224x224 ("photos_224", "photos_color_224"), in
batches of 64, in its own fresh process:

- `keras.utils.image_dataset_from_directory` + map(/255) + prefetch: the baseline written by
  hand, which every ratio is relative to;
- hand-written tf.data over the files (list_files, read, decode_jpeg, tf.image.resize, /255 in
  a parallel map, batch, prefetch);
- two decode ceilings over JPEG bytes already in memory (one tensor of every file), a parallel
  map on all cores: (a) decode_jpeg + tf.image.resize, what Keras does, and (b) tfpipe's own
  decode, `tfpipe.Image().decode_tensor` with its defaults;
- `tfpipe.Pipeline` on the folder, on TFRecords of the full-size JPEGs (`write_tfrecords` of
  the folder copies each three-channel JPEG byte for byte; the one-channel ones it stores
  re-encoded with three channels), and on the folder with `reduced_decode=False` (a full
  JPEG decode before the resize; the default is the DCT-scale decode every tfpipe path uses);
- `tfpipe.SequenceLoader` (workers=2), read through Keras's PyDatasetAdapter as `model.fit`
  reads a PyDataset;
- the peers, each set up as its documentation shows: Grain (`grain.DataLoader` over
  ArrayRecord files of the TFRecords' JPEG bytes, 2 worker processes, PIL decode) and NVIDIA
  DALI on the CPU (`fn.readers.tfrecord` over the same TFRecords with indexes made by DALI's
  `tfrecord2idx`, `fn.decoders.image(device="cpu")`, `fn.resize`, no GPU). A peer that cannot
  run here is reported as "not run" with the reason.

Every loader shuffles as it does by default (the ceilings do not; Grain's sampler needs a
seed). The resizes differ as the libraries do: TensorFlow's bilinear without antialiasing
(Keras, tf.data, the ceiling (a)), Pillow's bilinear with it (Grain), DALI's linear with it;
tfpipe's is its one resize (DCT-scale JPEG decode, block means from 2x the target, then
bilinear; docs/performance.md). DALI's batches are copied to
numpy arrays (`as_array`), as a framework would receive them.

Run it with `python -m benchmarks photos` (`make bench` runs it with the others);
TFPIPE_BENCH_QUICK=1 for the quick version used while developing (300 images, 1 repeat).

Each case imports its libraries and runs the garbage collection they left due (not timed),
then constructs its loader and reads 3 epochs:
`first_batch_s` is the time from the construction (the folder listed, the loader made) to
the first batch in hand, `first_epoch_s` to the last batch of the first epoch, `examples_per_s` the
images per second of epochs 2 and 3 (epoch 1 is the warm-up), `cores` the CPU time of the
process and its worker processes over those epochs divided by their wall time, and
`cpu_ms_per_image` that CPU time per image (what a busy machine disturbs least). 5 repeats,
interleaved (1 with TFPIPE_BENCH_QUICK=1); the table gives the median and the min-max of each,
and the ratio to the baseline of the same repeat (min and median). The folder, the TFRecords,
the ArrayRecord files and the DALI indexes are kept in benchmarks/data/ (or
TFPIPE_BENCH_DATA) under a name made of their parameters, and reused by later runs; the
TFRecords are written again when the writer's code (tfpipe's records, format and features
packages) has changed since.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import io
import os
import resource
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale
from benchmarks.photos import build_color_photo_folder, build_photo_folder

BATCH = 64
EPOCHS = 3  # the first is the warm-up
SIZES = ((128, 128), (224, 224))
COUNT = scale(2000, 300)
BASELINE = "keras image_dataset_from_directory"
GRAIN = "Grain, ArrayRecord, 2 processes (PIL)"
DALI = "DALI CPU pipeline, TFRecords"
DATA = Path(os.environ.get("TFPIPE_BENCH_DATA", Path(__file__).parent / "data"))


def _cpu_seconds() -> float:
    """CPU time of this process and of its worker processes, live or ended."""
    import psutil

    me = psutil.Process()
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = sum(me.cpu_times()[:2]) + ended.ru_utime + ended.ru_stime
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # a worker that just ended
            total += sum(child.cpu_times()[:2])
    return total


def _batch_images(batch: Any) -> int:
    from tfpipe.training.throughput import batch_size_of

    return batch_size_of(batch)


def _time(construct: Callable[[], Iterable[Any]], count: int) -> dict[str, Any]:
    """Constructs a loader of `EPOCHS` epochs of `count` images and times its batches."""
    # Importing TensorFlow leaves a full garbage collection due (~0.5 s over ~420,000 objects);
    # pay it here, or the first batch of whichever loader allocates more objects pays it.
    gc.collect()
    start = time.perf_counter()
    batches = iter(construct())
    first = next(batches)
    first_batch_s = time.perf_counter() - start
    seen = _batch_images(first)
    while seen < count:  # the warm-up epoch
        seen += _batch_images(next(batches))
    warm, cpu, timed = time.perf_counter(), _cpu_seconds(), 0
    first_epoch_s = warm - start
    for batch in batches:
        timed += _batch_images(batch)
    wall, cpu = time.perf_counter() - warm, _cpu_seconds() - cpu
    if seen + timed < EPOCHS * count:
        raise RuntimeError(f"the loader gave {seen + timed} images in {EPOCHS} epochs of {count}")
    return {
        "examples_per_s": timed / wall,
        "first_batch_s": first_batch_s,
        "first_epoch_s": first_epoch_s,
        "cores": cpu / wall,
        "cpu_ms_per_image": cpu * 1000 / timed,
        "timed_images": timed,
    }


def _import_tensorflow() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras  # noqa: F401
    import tensorflow  # noqa: F401


def keras_folder(folder: str, count: int, size: tuple[int, int]) -> dict[str, Any]:
    """`image_dataset_from_directory` + rescale + prefetch, as the Keras guides write it."""
    _import_tensorflow()
    import keras
    import tensorflow as tf

    def construct() -> Any:
        dataset = keras.utils.image_dataset_from_directory(
            folder, image_size=size, batch_size=BATCH, verbose=False
        )
        return (
            dataset.map(lambda x, y: (x / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE)
            .repeat(EPOCHS)
        )

    return _time(construct, count)


def hand_written_files(folder: str, count: int, size: tuple[int, int]) -> dict[str, Any]:
    """tf.data over the file list, one image per parallel map call, as the tf.data guide shows."""
    _import_tensorflow()
    import tensorflow as tf

    def construct() -> Any:
        classes = tf.constant(sorted(p.name for p in Path(folder).iterdir() if p.is_dir()))

        def load(path: Any) -> Any:
            image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
            label = tf.argmax(tf.cast(tf.strings.split(path, os.sep)[-2] == classes, tf.int32))
            return tf.image.resize(image, size) / 255.0, label

        return (
            tf.data.Dataset.list_files(f"{folder}/*/*.jpg", shuffle=True)
            .map(load, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(BATCH)
            .prefetch(tf.data.AUTOTUNE)
            .repeat(EPOCHS)
        )

    return _time(construct, count)


def ceiling_in_memory(
    folder: str, count: int, size: tuple[int, int], tfpipe_decode: bool
) -> dict[str, Any]:
    """Decode + resize of JPEG bytes already in one tensor: no I/O, no labels, all cores."""
    _import_tensorflow()
    import tensorflow as tf

    import tfpipe

    def keras_decode(data: Any) -> Any:
        return tf.image.resize(tf.io.decode_jpeg(data, channels=3), size) / 255.0

    def tfpipe_default_decode(data: Any) -> Any:
        return tfpipe.Image().decode_tensor(data, size, rescale=1 / 255)

    decode = tfpipe_default_decode if tfpipe_decode else keras_decode

    def construct() -> Any:
        data = tf.constant([p.read_bytes() for p in sorted(Path(folder).glob("*/*.jpg"))])
        return (
            tf.data.Dataset.from_tensor_slices(data)
            .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(BATCH)
            .prefetch(tf.data.AUTOTUNE)
            .repeat(EPOCHS)
        )

    return _time(construct, count)


def tfpipe_pipeline(
    source: str, folder: bool, count: int, size: tuple[int, int], reduced: bool = True
) -> dict[str, Any]:
    """`tfpipe.Pipeline` on the folder or on TFRecords, with its defaults (`reduced`: the
    default DCT-scale JPEG decode, or False for a full decode)."""
    _import_tensorflow()
    import tfpipe

    pipeline_class, from_directory = tfpipe.Pipeline, tfpipe.from_directory

    def construct() -> Any:
        pipeline = pipeline_class(
            from_directory(source) if folder else source,
            image_size=size,
            rescale=1 / 255,
            reduced_decode=reduced,
        )
        return (
            pipeline.shuffle().batch(BATCH).repeat(EPOCHS).as_supervised("image", "label").build()
        )

    return _time(construct, count)


def sequence_loader(folder: str, count: int, size: tuple[int, int]) -> dict[str, Any]:
    """`tfpipe.SequenceLoader`, 2 worker threads, read epoch by epoch as `model.fit` reads it."""
    _import_tensorflow()
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    import tfpipe

    loader_class, from_directory = tfpipe.SequenceLoader, tfpipe.from_directory

    def construct() -> Iterator[Any]:
        loader = loader_class(from_directory(folder), batch_size=BATCH, image_size=size, workers=2)
        adapter = PyDatasetAdapter(loader, shuffle=False)
        for _ in range(EPOCHS):
            adapter.on_epoch_begin()
            yield from adapter.get_tf_dataset()
            adapter.on_epoch_end()

    return _time(construct, count)


def _peer(module: str) -> Any:
    """Imports a peer library of the `bench` extra, or fails saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{e}; install the bench extra: pip install -e '.[bench]'") from e


def _grain_record(data: bytes) -> tuple[int, bytes]:
    """(label, JPEG bytes) of a record written by `_write_array_records`."""
    (label,) = struct.unpack_from("<q", data)
    return label, data[8:]


class _DecodeWithPil:
    """Grain's map transform (a `grain.transforms.Map` once grain is imported)."""

    size: tuple[int, int]

    def map(self, record: bytes) -> dict[str, Any]:
        import numpy as np
        from PIL import Image

        label, data = _grain_record(record)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        image = image.resize(self.size[::-1], Image.Resampling.BILINEAR)
        return {"image": np.asarray(image, np.float32) / np.float32(255), "label": label}


def grain_loader(records: str, count: int, size: tuple[int, int]) -> dict[str, Any]:
    """Grain's DataLoader over ArrayRecord files: shuffled sampler, 2 worker processes."""
    grain = _peer("grain")
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain reads absl flags; outside absl.app, the defaults
    transform = type("DecodeWithPil", (_DecodeWithPil, grain.transforms.Map), {"size": size})
    paths = sorted(str(p) for p in Path(records).glob("*.array_record"))

    def construct() -> Any:
        source = grain.sources.ArrayRecordDataSource(paths)
        sampler = grain.samplers.IndexSampler(len(source), shuffle=True, num_epochs=EPOCHS, seed=0)
        return grain.DataLoader(
            data_source=source,
            sampler=sampler,
            operations=[transform(), grain.transforms.Batch(BATCH)],
            worker_count=2,
        )

    return _time(construct, count)


def dali_pipeline(prefix: str, count: int, size: tuple[int, int]) -> dict[str, Any]:
    """DALI on the CPU: TFRecord reader (with DALI's indexes), CPU decoder, resize, normalize."""
    _peer("nvidia.dali")
    import nvidia.dali.fn as fn
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import pipeline_def, types

    files = sorted(str(p) for p in Path(prefix).parent.glob(f"{Path(prefix).name}-*.tfrecord"))

    @pipeline_def(batch_size=BATCH, num_threads=os.cpu_count(), device_id=None)
    def photos() -> Any:
        inputs = fn.readers.tfrecord(
            path=files,
            index_path=[f"{f}.idx" for f in files],
            features={
                "image": tfrec.FixedLenFeature((), tfrec.string, ""),
                "label": tfrec.FixedLenFeature([], tfrec.int64, -1),
            },
            random_shuffle=True,
            name="reader",
        )
        images = fn.decoders.image(inputs["image"], device="cpu", output_type=types.RGB)
        images = fn.resize(images, size=list(size))
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="HWC", mean=[0.0], std=[255.0]
        )
        return images, inputs["label"]

    def construct() -> Iterator[Any]:
        pipeline = photos()
        pipeline.build()
        for _ in range(-(-EPOCHS * count // BATCH)):
            images, labels = pipeline.run()
            yield images.as_array(), labels.as_array()

    return _time(construct, count)


def _write_array_records(prefix: str, folder: Path) -> None:
    """ArrayRecord files of the TFRecords' (label, JPEG bytes), one per TFRecord shard."""
    import tensorflow as tf
    from array_record.python.array_record_module import ArrayRecordWriter

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for shard in sorted(Path(prefix).parent.glob(f"{Path(prefix).name}-*.tfrecord")):
        writer = ArrayRecordWriter(str(folder / f"{shard.stem}.array_record"), "group_size:1")
        for serialized in tf.data.TFRecordDataset(str(shard)):
            example = tf.io.parse_single_example(serialized, spec)
            label, data = int(example["label"]), example["image"].numpy()
            writer.write(struct.pack("<q", label) + data)
        writer.close()


def _index_for_dali(prefix: str) -> None:
    """DALI's own `tfrecord2idx` index beside each TFRecord shard."""
    tool = Path(sys.executable).with_name("tfrecord2idx")
    for shard in sorted(Path(prefix).parent.glob(f"{Path(prefix).name}-*.tfrecord")):
        subprocess.run([str(tool), str(shard), f"{shard}.idx"], check=True, capture_output=True)


def _copied_byte_for_byte(folder: Path, prefix: str) -> int:
    """How many records hold a file's JPEG bytes unchanged."""
    import tensorflow as tf

    files = {hashlib.sha1(p.read_bytes()).digest() for p in folder.glob("*/*.jpg")}
    spec = {"image": tf.io.FixedLenFeature([], tf.string)}
    shards = sorted(str(p) for p in Path(prefix).parent.glob(f"{Path(prefix).name}-*.tfrecord"))
    return sum(
        hashlib.sha1(tf.io.parse_single_example(s, spec)["image"].numpy()).digest() in files
        for s in tf.data.TFRecordDataset(shards)
    )


# name of the set (the tables' prefix) -> its folder's builder and its data's folder name
SETS: dict[str, tuple[Callable[..., Path], str]] = {
    "photos": (build_photo_folder, f"photos-{COUNT}-seed0-300-1200"),
    "photos_color": (build_color_photo_folder, f"photos-color-{COUNT}-seed0-300-900"),
}


def _writer_fingerprint() -> str:
    """A digest of the code that decides what the written records hold, so that records
    written by an older writer (say, without the metadata's "stored_images") are not reused."""
    import tfpipe

    package = Path(tfpipe.__file__).parent
    digest = hashlib.sha1()
    for path in sorted(
        p for part in ("records", "format", "features") for p in (package / part).glob("*.py")
    ):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def prepare(work: Path, build: Callable[..., Path]) -> tuple[Path, str, Path, dict[str, Any]]:
    """The folder `build` makes, its TFRecords (+ DALI indexes) and ArrayRecord files, made
    once and kept."""
    import tfpipe

    folder = build(work / "images", count=COUNT, seed=0)
    prefix, arrays = str(work / "records" / "train"), work / "array_records"
    done = work / f".prepared-{tfpipe.__version__}-{_writer_fingerprint()}"
    if not done.is_file():
        for marker in work.glob(".prepared-*"):
            marker.unlink()
        for stale in (Path(prefix).parent, arrays):
            shutil.rmtree(stale, ignore_errors=True)
        start = time.perf_counter()
        tfpipe.write_tfrecords(tfpipe.from_directory(folder), prefix, progress=False)
        write_s = time.perf_counter() - start
        _index_for_dali(prefix)
        _write_array_records(prefix, arrays)
        done.write_text(f"{write_s}\n{_copied_byte_for_byte(folder, prefix)}\n")
    write_s, copied = done.read_text().split()
    files = list(folder.glob("*/*.jpg"))
    facts = {
        "images": len(files),
        "folder_mb": sum(p.stat().st_size for p in files) / 2**20,
        "write_tfrecords_s": float(write_s),
        "records_copied_byte_for_byte": int(copied),
        "batch": BATCH,
        "epochs": f"{EPOCHS} (the first is the warm-up)",
    }
    return folder, prefix, arrays, facts


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for name, (build, data) in SETS.items():
        work = DATA / data
        folder, prefix, arrays, facts = prepare(work, build)
        print(
            f"{name}: {facts['images']} photos ({facts['folder_mb']:.0f} MB) in {work}; "
            f"{facts['records_copied_byte_for_byte']} of them copied byte for byte into "
            "TFRecords"
        )
        for size in SIZES:
            _compare(f"{name}_{size[0]}", (str(folder), prefix, str(arrays)), size, facts)


def _compare(
    title: str, data: tuple[str, str, str], size: tuple[int, int], facts: dict[str, Any]
) -> None:
    """Every case on one folder (and its records) at one size: table `title`."""
    root, prefix, arrays = data
    cases = {
        BASELINE: (keras_folder, (root, COUNT, size)),
        "hand-written tf.data, files": (hand_written_files, (root, COUNT, size)),
        "ceiling: in memory, decode_jpeg + resize": (
            ceiling_in_memory,
            (root, COUNT, size, False),
        ),
        "ceiling: in memory, tfpipe decode_tensor": (
            ceiling_in_memory,
            (root, COUNT, size, True),
        ),
        "Pipeline, folder": (tfpipe_pipeline, (root, True, COUNT, size)),
        "Pipeline, TFRecords of the full-size JPEGs": (
            tfpipe_pipeline,
            (prefix, False, COUNT, size),
        ),
        "Pipeline, folder, reduced_decode=False (full decode)": (
            tfpipe_pipeline,
            (root, True, COUNT, size, False),
        ),
        "SequenceLoader, folder, workers=2": (
            sequence_loader,
            (root, COUNT, size),
        ),
        GRAIN: (grain_loader, (str(arrays), COUNT, size)),
        DALI: (dali_pipeline, (prefix, COUNT, size)),
    }
    compare(
        title,
        cases,
        baseline=BASELINE,
        extra={**facts, "size": list(size), "load_average_at_start": os.getloadavg()},
        pairs={name: BASELINE for name in cases if name != BASELINE},
        repeats=5,
        spreads=("first_batch_s", "first_epoch_s", "cores", "cpu_ms_per_image"),
        optional=frozenset({GRAIN, DALI}),
    )


if __name__ == "__main__":
    main()
