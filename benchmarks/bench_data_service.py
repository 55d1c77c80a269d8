"""`Pipeline.distribute`: a Pipeline through a local tf.data service against the same in-process.

Issue 13. One dispatcher and one worker run in the case's process (this machine has 2 cores:
a remote worker would add cores, here the point is what the service itself costs). The same
Pipeline (shuffle, batch 64, as_supervised) is read in-process and through the service:

- table "data_service_jpeg": 256x256 JPEG records decoded and resized to 128x128 float32:
  decoding dominates, so the service should cost little (goal >= 0.9);
- table "data_service_raw": records of raw 128x128 pixels (`tfpipe write --image-size`):
  nothing to decode, so the ratios show what the gRPC hop (serialize, send, receive) costs
  when reading is all there is: batches of float32 images (12 MiB) and of uint8 ones (3 MiB,
  rescaled in the model), each paired with the same input in-process.

Throughput is timed within one pass (`first_batch_s` includes starting the service job:
every epoch on the service starts one). Each run also records `cpu_ms_per_batch`, the CPU time
of all the process's threads per timed batch: worker, gRPC and trainer alike here, so the
served cases show what the hop adds in CPU, a figure the other jobs on the machine disturb far
less than the throughput. Throughput itself varied 2x between runs of the same case on this
shared machine, hence 5 repeats.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

SIZE = (128, 128)
BATCH = 64


def pipeline(prefix: str, served: bool, resize: bool, rescale: bool = True) -> dict[str, Any]:
    """The Pipeline in this process, or through a dispatcher + worker started here; images
    float32 in [0, 1], or uint8 without `rescale` (to be rescaled in the model)."""
    import tensorflow as tf

    import tfpipe
    from tfpipe.training.throughput import measure

    servers: list[Any] = []
    p = tfpipe.Pipeline(
        prefix, image_size=SIZE if resize else None, rescale=1 / 255 if rescale else None
    )
    p = p.shuffle().batch(BATCH).as_supervised("image", "label")
    if served:
        service = tf.data.experimental.service
        dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
        port = dispatcher.target.rsplit(":", 1)[1]
        worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{port}"))
        servers = [worker, dispatcher]
        p = p.distribute(f"grpc://localhost:{port}")
    try:
        batches = p.batches_per_epoch() or 0
        warmup = scale(5, 2)
        result = measure(p.build(), num_batches=batches - warmup - 1, warmup=warmup)
    finally:
        for server in servers:
            server.stop()
    return {
        "examples_per_s": result.examples_per_s,
        "first_batch_s": result.first_batch_s,
        "batches": result.batches,
        "cpu_ms_per_batch": 1000 * result.cpu_s / result.batches,
    }


def _prepare(work: Path) -> tuple[str, str]:
    import tfpipe
    import tfpipe.cli.parser as cli
    from tfpipe.sources.synthetic import make_image_folder

    root = make_image_folder(
        work / "images", num_classes=6, per_class=scale(500, 40), size=(256, 256), seed=0
    )
    jpeg = str(work / "jpeg" / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(root), jpeg, num_shards=8, progress=False)
    raw = str(work / "raw" / "train")
    with contextlib.redirect_stdout(io.StringIO()):  # the command's summary
        status = cli.main(
            ["write", str(root), raw, "--image-size", f"{SIZE[0]}x{SIZE[1]}", "--shards", "8"]
        )
    if status != 0:
        raise RuntimeError(f"tfpipe write --image-size failed with status {status}")
    return jpeg, raw


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-service-") as tmp:
        jpeg, raw = _prepare(Path(tmp))
        extra = {"images": scale(3000, 240), "batch": BATCH, "size": SIZE, "workers": 1}
        jpeg_kind = "JPEG 256x256 -> 128x128 float32"
        compare(
            "data_service_jpeg",
            {
                f"Pipeline in-process, {jpeg_kind} (baseline)": (pipeline, (jpeg, False, True)),
                f"Pipeline via local tf.data service, {jpeg_kind}": (
                    pipeline,
                    (jpeg, True, True),
                ),
            },
            baseline=f"Pipeline in-process, {jpeg_kind} (baseline)",
            goals={f"Pipeline via local tf.data service, {jpeg_kind}": 0.9},
            pairs={
                f"Pipeline via local tf.data service, {jpeg_kind}": (
                    f"Pipeline in-process, {jpeg_kind} (baseline)"
                )
            },
            extra=extra,
            repeats=5,
        )
        raw_cases = {
            "Pipeline in-process, raw 128x128 float32 (baseline)": (pipeline, (raw, False, False)),
            "Pipeline via local tf.data service, raw 128x128 float32": (
                pipeline,
                (raw, True, False),
            ),
            "Pipeline in-process, raw 128x128 uint8": (pipeline, (raw, False, False, False)),
            "Pipeline via local tf.data service, raw 128x128 uint8": (
                pipeline,
                (raw, True, False, False),
            ),
        }
        names = list(raw_cases)
        compare(
            "data_service_raw",
            raw_cases,
            baseline=names[0],
            pairs={names[1]: names[0], names[3]: names[2]},
            extra=extra,
            repeats=5,
        )


if __name__ == "__main__":
    main()
