"""`Pipeline.sample_from` (a weighted mixture of two Pipelines) against its sources alone and
against `tf.data.Dataset.sample_from_datasets` written by hand.

Issue 42: "the mixture of two Pipelines costs <= 1.05x the slower of them alone per example;
the realised weights over 10^4 examples are within 1% of the asked ones." Two record sets of
images, A of 2,100 96x96 JPEGs (the cheaper to decode) and B of 900 160x160 PNGs, both decoded
to float32 64x64 in [0, 1], shuffled, repeated, in batches of 64, each case in its own process:

- table "mixture" (ratios to the hand-written tf.data mixture): A alone, B alone and their
  mixture with weights 0.7/0.3 as Pipelines (epochs of 3,000 examples, the default; and of
  10^6, so that its sources never restart within the run), and the same three written by hand
  in tf.data (TFRecordDataset -> shuffle -> map(parse + decode) -> repeat, mixed by
  `sample_from_datasets`). Beside it, per repeat, each mixture's time per example over its
  slower source's (the issue's goal, <= 1.05), over its sources' weighted time 0.7·tA + 0.3·tB
  (what mixing itself costs: 70% of the mixture are the cheaper images), and its CPU time per
  example over the sources' weighted CPU time;
- the realised shares of A and B over 10^4 examples, counted by labels that name the source:
  the Pipeline mixture's epochs hold exact counts (only the last, partial epoch is random),
  `sample_from_datasets` draws every example at random (also over ten seeds).
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import QUICK, RESULTS, compare, run_isolated, scale

SIZE = (64, 64)
BATCH = 64
WEIGHTS = (0.7, 0.3)
COUNTED = 10_000
SEEDS = 10
TFPIPE_MIX = "Pipeline.sample_from(A, B) 0.7/0.3"
TFDATA_MIX = "tf.data sample_from_datasets (baseline)"
TFPIPE_LONG = "Pipeline.sample_from, epochs of 10^6 (no restarts)"
TFPIPE_ALONE = ("Pipeline A alone (96 px JPEG)", "Pipeline B alone (160 px PNG)")
TFDATA_ALONE = ("tf.data A alone (96 px JPEG)", "tf.data B alone (160 px PNG)")


def _measure(dataset: Any) -> dict[str, Any]:
    from tfpipe.training.throughput import measure

    result = measure(dataset, num_batches=scale(200, 8), warmup=scale(10, 2))
    return {
        "examples_per_s": result.examples_per_s,
        "cpu_us_per_example": result.cpu_s / result.examples * 1e6,
    }


def _source(prefix: str, index: int, tagged: bool) -> Any:
    """Source `index` as a Pipeline, shuffled with a seed; `tagged` replaces its labels by
    `index` (a feature added by a source's map is left out of a mixture: only the sources'
    schema features are mixed)."""
    import tensorflow as tf

    import tfpipe

    pipeline = tfpipe.Pipeline(prefix, image_size=SIZE, rescale=1 / 255).shuffle(seed=index)
    if tagged:
        tag = tf.constant(index, tf.int64)
        pipeline = pipeline.map(lambda ex: {**ex, "label": tag}, random=False)
    return pipeline


def _mixture(prefixes: tuple[str, str], tagged: bool, examples_per_epoch: int | None) -> Any:
    import tfpipe

    sources = [_source(prefix, i, tagged) for i, prefix in enumerate(prefixes)]
    return tfpipe.Pipeline.sample_from(
        sources, WEIGHTS, seed=0, examples_per_epoch=examples_per_epoch
    )


def tfpipe_alone(prefix: str) -> dict[str, Any]:
    """One source as a Pipeline: shuffled, decoded, repeated, batched."""
    return _measure(_source(prefix, 0, False).repeat().batch(BATCH).build())


def tfpipe_mixture(prefixes: tuple[str, str], examples_per_epoch: int | None) -> dict[str, Any]:
    """`Pipeline.sample_from` of the two sources, repeated and batched; with
    `examples_per_epoch` longer than the run, its sources never restart (a mixture's sources
    are read afresh every epoch)."""
    pipeline = _mixture(prefixes, False, examples_per_epoch)
    return _measure(pipeline.repeat().batch(BATCH).build())


def _hand_written(prefix: str, index: int, tagged: bool) -> Any:
    """One source in tf.data as its guide writes it: TFRecordDataset -> shuffle ->
    map(parse + decode + resize + rescale) -> repeat."""
    import tensorflow as tf

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(serialized: Any) -> Any:
        example = tf.io.parse_single_example(serialized, spec)
        image = tf.io.decode_image(example["image"], channels=3, expand_animations=False)
        example["image"] = tf.image.resize(image, SIZE) / 255.0
        if tagged:
            example["label"] = tf.constant(index, tf.int64)
        return example

    files = sorted(str(p) for p in Path(prefix).parent.glob(f"{Path(prefix).name}-*.tfrecord"))
    return (
        tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
        .shuffle(4096, seed=index)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .repeat()
    )


def tfdata_alone(prefix: str) -> dict[str, Any]:
    """One source written by hand, batched and prefetched."""
    import tensorflow as tf

    dataset = _hand_written(prefix, 0, False).batch(BATCH).prefetch(tf.data.AUTOTUNE)
    return _measure(dataset)


def _tfdata_mixed(prefixes: tuple[str, str], tagged: bool) -> Any:
    import tensorflow as tf

    sources = [_hand_written(prefix, i, tagged) for i, prefix in enumerate(prefixes)]
    return tf.data.Dataset.sample_from_datasets(sources, list(WEIGHTS), seed=0)


def tfdata_mixture(prefixes: tuple[str, str]) -> dict[str, Any]:
    """`sample_from_datasets` over the two hand-written sources, batched and prefetched."""
    import tensorflow as tf

    dataset = _tfdata_mixed(prefixes, False).batch(BATCH).prefetch(tf.data.AUTOTUNE)
    return _measure(dataset)


def _shares(sources: list[int]) -> dict[str, Any]:
    """Each source's share of `sources` (source indices) and its distance to its weight."""
    counts = collections.Counter(sources)
    shares = [counts[i] / len(sources) for i in range(len(WEIGHTS))]
    errors = [abs(share - weight) for share, weight in zip(shares, WEIGHTS, strict=True)]
    return {"examples": len(sources), "shares": shares, "errors": errors}


def realised_shares(prefixes: tuple[str, str]) -> dict[str, Any]:
    """The shares of A and B in the first 10^4 examples of both mixtures, counted by their
    labels (each source's index); for `sample_from_datasets` also over ten seeds (its draws
    alone, over two constant datasets: the same choices as over the records)."""
    import tensorflow as tf

    pipeline = _mixture(prefixes, True, None)
    tfpipe_ds = pipeline.repeat().batch(500).build().take(COUNTED // 500)
    tfpipe_sources = [int(s) for batch in tfpipe_ds for s in batch["label"]]
    tfdata_ds = _tfdata_mixed(prefixes, True).take(COUNTED)
    tfdata_sources = [int(ex["label"]) for ex in tfdata_ds]
    seeds = []
    for seed in range(SEEDS):
        constants = [tf.data.Dataset.from_tensors(i).repeat() for i in range(len(WEIGHTS))]
        draws = tf.data.Dataset.sample_from_datasets(constants, list(WEIGHTS), seed=seed)
        seeds.append(max(_shares([int(s) for s in draws.take(COUNTED)])["errors"]))
    return {
        "asked": list(WEIGHTS),
        "epoch_counts": list(pipeline.mixture.counts),
        "tfpipe": _shares(tfpipe_sources),
        "tf.data": _shares(tfdata_sources),
        "tf.data_max_error_per_seed": seeds,
    }


def _prepare(work: Path) -> tuple[str, str]:
    """Records of A, 2,100 JPEGs of 96x96, and of B, 900 PNGs of 160x160 (the same drawings
    saved losslessly: a PNG has no reduced decode and costs more to decode than a JPEG)."""
    from PIL import Image as PILImage

    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    prefixes = []
    for name, size, per_class in (("a", 96, scale(350, 40)), ("b", 160, scale(150, 20))):
        root = make_image_folder(
            work / f"images-{name}", num_classes=6, per_class=per_class, size=(size, size)
        )
        if name == "b":
            for jpeg in sorted(root.glob("*/*.jpg")):
                PILImage.open(jpeg).save(jpeg.with_suffix(".png"))
                jpeg.unlink()
        prefix = str(work / name / "train")
        tfpipe.write_tfrecords(tfpipe.from_directory(root), prefix, progress=False)
        prefixes.append(prefix)
    return prefixes[0], prefixes[1]


def _ratios(report: dict[str, Any]) -> dict[str, Any]:
    """Per repeat, each mixture's time per example over its slower source's (the issue's goal)
    and over its sources' weighted time (0.7·tA + 0.3·tB: what mixing itself costs), and its
    CPU time per example over its sources' weighted CPU time."""
    runs = {row["case"]: row["runs"] for row in report["rows"]}
    result = {}
    for mixture, alone in (
        (TFPIPE_MIX, TFPIPE_ALONE),
        (TFPIPE_LONG, TFPIPE_ALONE),
        (TFDATA_MIX, TFDATA_ALONE),
    ):
        medians = [statistics.median(r["examples_per_s"] for r in runs[name]) for name in alone]
        slower = medians.index(min(medians))
        ratios: dict[str, list[float]] = collections.defaultdict(list)
        for mixed, *sources in zip(runs[mixture], *(runs[name] for name in alone), strict=True):
            times = [1 / r["examples_per_s"] for r in (mixed, *sources)]
            cpus = [r["cpu_us_per_example"] for r in (mixed, *sources)]
            weighted = sum(w * t for w, t in zip(WEIGHTS, times[1:], strict=True))
            weighted_cpu = sum(w * c for w, c in zip(WEIGHTS, cpus[1:], strict=True))
            ratios["time per example / the slower source's"].append(times[0] / times[1 + slower])
            ratios["time per example / the sources' weighted"].append(times[0] / weighted)
            ratios["CPU per example / the sources' weighted"].append(cpus[0] / weighted_cpu)
        for name, values in ratios.items():
            result[f"{mixture}: {name}"] = {"ratios": values, "median": statistics.median(values)}
    return result


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-mixture-") as tmp:
        a, b = _prepare(Path(tmp))
        shares = run_isolated(realised_shares, (a, b))
        report = compare(
            "mixture",
            {
                TFDATA_MIX: (tfdata_mixture, ((a, b),)),
                TFDATA_ALONE[0]: (tfdata_alone, (a,)),
                TFDATA_ALONE[1]: (tfdata_alone, (b,)),
                TFPIPE_MIX: (tfpipe_mixture, ((a, b), None)),
                TFPIPE_LONG: (tfpipe_mixture, ((a, b), 10**6)),
                TFPIPE_ALONE[0]: (tfpipe_alone, (a,)),
                TFPIPE_ALONE[1]: (tfpipe_alone, (b,)),
            },
            baseline=TFDATA_MIX,
            extra={
                "load_average_at_start": os.getloadavg(),
                "batch": BATCH,
                "size": SIZE,
                "weights": WEIGHTS,
            },
            spreads=("cpu_us_per_example",),
            repeats=5,
        )
    ratios = _ratios(report)
    report["extra"]["mixture_costs_run_by_run"] = ratios
    report["extra"]["realised_shares"] = shares
    path = RESULTS / f"mixture{'-quick' if QUICK else ''}.json"
    path.write_text(json.dumps(report, indent=2))
    for name, result in ratios.items():
        each = ", ".join(f"{r:.3f}" for r in result["ratios"])
        print(f"{name}, each repeat: {each}; median {result['median']:.3f}")
    for case in ("tfpipe", "tf.data"):
        s = shares[case]
        print(
            f"realised shares over {s['examples']:,} examples, {case}: "
            + ", ".join(f"{x:.4f}" for x in s["shares"])
            + f" (asked {WEIGHTS}; |error| max {max(s['errors']):.4f})"
        )
    print(
        "sample_from_datasets, max |error| per seed: "
        + ", ".join(f"{e:.4f}" for e in shares["tf.data_max_error_per_seed"])
    )


if __name__ == "__main__":
    main()
