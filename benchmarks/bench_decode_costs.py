"""Where the CPU of decoding real photos goes: tfpipe's decode against Keras's, per image.

Issue 23 ("Fast on real photos") asks for the Pipeline at >= 1.3x Keras's folder loader on
photos of mixed sizes. Both loaders keep every core busy (`bench_photos`), so what decides
the ratio is the CPU each spends on one image. This measures it for the decode and resize
alone: JPEG bytes already in memory (every 5th photo of `bench_photos`' folder, 300-1,200 px),
one tf.data thread (no parallelism, no autotuning: the work itself, not how it is spread),
CPU seconds of the process over two passes after a warm-up pass. Each case runs in its own
fresh process, 5 interleaved repeats; the table gives images per CPU second, the median, and
its ratio to the baseline written by hand below (Keras's decode).

- baseline: what `image_dataset_from_directory` does per image, `decode_jpeg` (TensorFlow's
  default IDCT) then `tf.image.resize` (bilinear, no antialiasing);
- the same with libjpeg's accurate IDCT, which tfpipe uses for Pillow's pixels;
- tfpipe's DCT-scale decode (`decoding.decode_reduced`) then a plain bilinear resize: what
  tfpipe would cost without antialiasing;
- the same with TensorFlow's antialiased bilinear (`ScaleAndTranslate`) where the image is
  still at least twice the target in a side: tfpipe's resize until the sixth session;
- `Image.decode_tensor`, tfpipe's own decode and resize (means of k x k blocks where a side is
  at least twice the target, then bilinear), with the EXIF orientation read for the whole set
  beforehand, as the Pipeline reads it per batch;
- the same with `reduced_decode=False` (a full decode first).

`block_share` in the JSON is the share of the photos still at least twice the target in a
side after the DCT-scale decode: those that get the block means (or the antialiasing).
Run it with `python -m benchmarks decode_costs`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_photos import COUNT, DATA, SIZES
from benchmarks.harness import compare, scale
from benchmarks.photos import build_photo_folder

STEP = 5  # every 5th photo of the folder
PASSES = scale(2, 1)  # timed passes, after one warm-up pass
BASELINE = "Keras's decode: decode_jpeg + bilinear resize"
CASES = {
    BASELINE: "keras",
    "decode_jpeg, accurate IDCT + bilinear resize": "accurate",
    "tfpipe DCT-scale decode + bilinear resize (no antialiasing)": "dct_bilinear",
    "tfpipe DCT-scale decode + antialiased bilinear from 2x (the old resize)": "dct_antialiased",
    "tfpipe decode_tensor (its one resize)": "tfpipe",
    "tfpipe decode_tensor, reduced_decode=False": "tfpipe_full",
}


def _photos(folder: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted(Path(folder).glob("*/*.jpg"))[::STEP]]


def _decoder(kind: str, size: tuple[int, int]) -> Any:
    """The map function of one case, over (JPEG bytes, EXIF orientation)."""
    import tensorflow as tf

    import tfpipe
    from tfpipe.features import decoding

    image = tfpipe.Image()

    def keras(data: Any, turn: Any) -> Any:
        return tf.image.resize(tf.io.decode_jpeg(data, channels=3), size) / 255.0

    def accurate(data: Any, turn: Any) -> Any:
        decoded = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE")
        return tf.image.resize(decoded, size) / 255.0

    def dct_bilinear(data: Any, turn: Any) -> Any:
        return tf.image.resize(decoding.decode_reduced(data, 3, size, turn), size) / 255.0

    def dct_antialiased(data: Any, turn: Any) -> Any:
        decoded = decoding.decode_reduced(data, 3, size, turn)
        return (
            tf.cond(
                tf.reduce_any(tf.shape(decoded)[:2] >= 2 * tf.constant(size)),
                lambda: tf.round(tf.image.resize(decoded, size, antialias=True)),
                lambda: tf.floor(tf.image.resize(decoded, size)),
            )
            / 255.0
        )

    def tfpipe_default(data: Any, turn: Any) -> Any:
        return image.decode_tensor(data, size, rescale=1 / 255, orientation=turn)

    def tfpipe_full(data: Any, turn: Any) -> Any:
        return image.decode_tensor(data, size, reduced=False, rescale=1 / 255, orientation=turn)

    kinds = {
        "keras": keras,
        "accurate": accurate,
        "dct_bilinear": dct_bilinear,
        "dct_antialiased": dct_antialiased,
        "tfpipe": tfpipe_default,
        "tfpipe_full": tfpipe_full,
    }
    return kinds[kind]


def cpu_per_image(folder: str, kind: str, size: tuple[int, int]) -> dict[str, Any]:
    """Images per CPU second of one decode in one tf.data thread."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import tfpipe

    photos = tf.constant(_photos(folder))
    turns = tfpipe.Image().orientations(photos)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    options.autotune.enabled = False
    dataset = (
        tf.data.Dataset.from_tensor_slices((photos, turns))
        .map(_decoder(kind, size))
        .batch(64)
        .with_options(options)
    )
    for _ in dataset:  # the warm-up pass
        pass
    start = time.process_time()
    for _ in range(PASSES):
        for _ in dataset:
            pass
    cpu = time.process_time() - start
    images = PASSES * len(photos)
    return {"images_per_cpu_s": images / cpu, "cpu_ms_per_image": cpu * 1000 / images}


def block_share(folder: str, size: tuple[int, int]) -> dict[str, float]:
    """The share of the photos at least twice `size` in a side after the DCT-scale decode."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from tfpipe.features import decoding

    def over_twice(data: bytes) -> bool:
        decoded = tf.shape(decoding.decode_reduced(tf.constant(data), 3, size))[:2]
        return bool(tf.reduce_any(decoded >= 2 * tf.constant(size)))

    photos = _photos(folder)
    return {"block_share": sum(map(over_twice, photos)) / len(photos)}


def main() -> None:
    from benchmarks.harness import run_isolated

    folder = str(build_photo_folder(DATA / f"photos-{COUNT}-seed0-300-1200" / "images", COUNT))
    for size in SIZES:
        share = run_isolated(block_share, folder, size)["block_share"]
        print(f"{size[0]}x{size[1]}: {share:.0%} of the photos get the block means")
        compare(
            f"decode_costs_{size[0]}",
            {name: (cpu_per_image, (folder, kind, size)) for name, kind in CASES.items()},
            baseline=BASELINE,
            metric="images_per_cpu_s",
            extra={
                "photos": len(_photos(folder)),
                "size": list(size),
                "block_share": share,
                "load_average_at_start": os.getloadavg(),
            },
            repeats=5,
            spreads=("cpu_ms_per_image",),
        )


if __name__ == "__main__":
    main()
