"""The tf.data service servers behind `tfpipe service dispatcher` and `tfpipe service worker`.

Each runs `tf.data.experimental.service.DispatchServer` or `WorkerServer` in the foreground,
prints the address to give to the others, and stops cleanly on SIGTERM or SIGINT (Ctrl+C).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, TextIO

import tensorflow as tf

from tfpipe.loaders.service import grpc_address

_POLL_S = 0.5
_STOP_S = 2.0  # seconds a stopping server may wait for open requests


def run_dispatcher(port: int, host: str, work_dir: str | None, out: TextIO) -> None:
    """Serves a dispatcher on `port` (0: any free port) until SIGTERM or SIGINT.

    With `work_dir`, the dispatcher journals its state there (fault-tolerant mode), so that a
    restarted dispatcher resumes its jobs.
    """
    config = tf.data.experimental.service.DispatcherConfig(
        port=port,
        work_dir=work_dir,
        fault_tolerant_mode=work_dir is not None,
    )
    server = tf.data.experimental.service.DispatchServer(config)
    bound = int(server.target.rsplit(":", 1)[1])
    _serve(server, "dispatcher", f"grpc://{host}:{bound}", out)


def run_worker(dispatcher: str, port: int, host: str, out: TextIO) -> None:
    """Serves a worker of `dispatcher` ("HOST:PORT") on `port` until SIGTERM or SIGINT; it
    tells the dispatcher that trainers reach it at `host`."""
    target = grpc_address("--dispatcher", dispatcher).split("://", 1)[1]
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=target,
        worker_address=f"{host}:%port%",
        port=port,
        data_transfer_address=f"{host}:%dts_port%",
    )
    server = tf.data.experimental.service.WorkerServer(config)
    bound = int(server._address.rsplit(":", 1)[1])  # TF exposes the bound port no other way
    _serve(server, f"worker of grpc://{target}", f"{host}:{bound}", out)


def _serve(server: Any, what: str, address: str, out: TextIO) -> None:
    """Serves until SIGTERM or SIGINT, then stops the server within `_STOP_S` seconds.

    A worker that has served a training run took ~10 s in `server.stop()` (gRPC's graceful
    shutdown waits for the trainers' open streams); past `_STOP_S` the process ends at once,
    status 0, cutting those streams, as they would be cut by the trainer's end anyway.
    """
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop.set())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        print(f"tf.data service {what} listening at {address}", file=out, flush=True)
        while not stop.wait(_POLL_S):
            pass
    finally:
        stopping = threading.Thread(target=server.stop, daemon=True)
        stopping.start()
        stopping.join(_STOP_S)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    with contextlib.suppress(OSError):  # whoever read the address may be gone already
        print(f"tf.data service {what} at {address}: stopped", file=out, flush=True)
    if stopping.is_alive():  # its C++ shutdown would hold the interpreter's exit too
        os._exit(0)
