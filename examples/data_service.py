"""Train with the input read and decoded by a tf.data service, here on this machine.

On a real cluster the dispatcher and the workers run on other hosts (see
docs/guides/data-service.md); this script starts them as the same commands would, on
127.0.0.1:

    tfpipe service dispatcher --port 0 --host 127.0.0.1
    tfpipe service worker --dispatcher 127.0.0.1:PORT --host 127.0.0.1

then writes a small image dataset (4 shards: the unit of work a worker takes), trains a small
CNN with `tfpipe.fit` on `Pipeline(...).distribute("grpc://127.0.0.1:PORT")`, prints which
stages ran on the workers (`explain()`) and the fit report, and stops both servers with
SIGTERM.

Run:
    python examples/data_service.py                # small: about 30 s on 2 CPU cores
    python examples/data_service.py --size large   # 3,000 images
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import keras

import tfpipe
from tfpipe.sources.synthetic import make_image_folder

START_S = 60.0
SIZES = {"small": 40, "large": 1000}  # images per class (3 classes)


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Runs `tfpipe service ARGS` in its own process group; returns it and its address."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tfpipe", "service", *args, "--host", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    stdout = server.stdout
    assert stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_S)
    if not lines or "listening at" not in lines[0]:
        os.killpg(server.pid, signal.SIGKILL)
        raise RuntimeError(f"`tfpipe service {args[0]}` did not start: {lines}")
    print(lines[0].strip())
    return server, lines[0].split()[-1]


def stop(servers: list[subprocess.Popen[str]]) -> None:
    """SIGTERM to every server at once (a clean stop, each within a few seconds), then
    SIGKILL to one still running after a while."""
    for server in servers:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
    for server in servers:
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)


def build_model() -> keras.Model:
    """A small CNN over 32x32 images of 3 classes."""
    inputs = keras.Input((32, 32, 3))
    features = keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax")(
        keras.layers.GlobalAveragePooling2D()(features)
    )
    model = keras.Model(inputs, outputs)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Starts the servers, trains through them, stops them; returns the last epoch's metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/data-service"))
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args(argv)

    images = make_image_folder(
        args.workdir / "images", num_classes=3, per_class=SIZES[args.size], size=(48, 48)
    )
    prefix = args.workdir / "records" / "train"
    tfpipe.write_tfrecords(tfpipe.from_directory(images), prefix, num_shards=4, progress=False)

    servers = []
    try:
        dispatcher, address = start("dispatcher", "--port", "0")
        servers.append(dispatcher)
        worker, _ = start("worker", "--dispatcher", address)
        servers.append(worker)
        pipeline = (
            tfpipe.Pipeline(prefix, image_size=(32, 32), rescale=1 / 255)
            .shuffle()
            .batch(16)
            .as_supervised("image", "label")
            .distribute(address)
        )
        print(pipeline.explain())
        history = tfpipe.fit(build_model(), pipeline, epochs=args.epochs, verbose=0)
    finally:
        stop(servers)
    return {name: values[-1] for name, values in history.history.items()}


if __name__ == "__main__":
    print(main())
