"""`Pipeline.distribute`: a Pipeline through a local tf.data service against the same in-process.

Issue 13. One dispatcher and one worker run in the case's process (this machine has 2 cores:
a remote worker would add cores, here the point is what the service itself costs). The same
Pipeline (shuffle, batch 64, as_supervised) is read in-process and through the service:

- table "data_service_jpeg": 256x256 JPEG records decoded and resized to 128x128 float32:
  decoding dominates, so the service should cost little (goal >= 0.9);
- table "data_service_raw": records of raw 128x128 pixels (`tfpipe write --image-size`):
  nothing to decode, so the ratio shows what the gRPC hop (serialize, send, receive 3 MiB
  batches) costs when reading is all there is.

Throughput is timed within one pass (`first_batch_s` includes starting the service job:
every epoch on the service starts one).
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


def pipeline(prefix: str, served: bool, resize: bool) -> dict[str, Any]:
    """The Pipeline in this process, or through a dispatcher + worker started here."""
    import tensorflow as tf

    import tfpipe
    from tfpipe.bench import measure

    servers: list[Any] = []
    p = tfpipe.Pipeline(prefix, image_size=SIZE if resize else None, rescale=1 / 255)
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
    }


def _prepare(work: Path) -> tuple[str, str]:
    import tfpipe
    from tfpipe import cli
    from tfpipe.synthetic import make_image_folder

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
        for title, prefix, resize in (
            ("data_service_jpeg", jpeg, True),
            ("data_service_raw", raw, False),
        ):
            kind = "JPEG 256x256 -> 128x128" if resize else "raw 128x128"
            compare(
                title,
                {
                    f"Pipeline in-process, {kind} (baseline)": (pipeline, (prefix, False, resize)),
                    f"Pipeline via local tf.data service, {kind}": (
                        pipeline,
                        (prefix, True, resize),
                    ),
                },
                baseline=f"Pipeline in-process, {kind} (baseline)",
                goals={f"Pipeline via local tf.data service, {kind}": 0.9} if resize else None,
                pairs={
                    f"Pipeline via local tf.data service, {kind}": (
                        f"Pipeline in-process, {kind} (baseline)"
                    )
                },
                extra=extra,
            )


if __name__ == "__main__":
    main()
