"""Fixtures of the loader tests: a tf.data service to distribute pipelines on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tensorflow as tf

service_lib = tf.data.experimental.service


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """An in-process dispatcher with 2 workers; its address."""
    dispatcher = service_lib.DispatchServer(service_lib.DispatcherConfig(port=0))
    port = dispatcher.target.rsplit(":", 1)[1]
    workers = []
    try:
        for _ in range(2):
            config = service_lib.WorkerConfig(
                dispatcher_address=f"127.0.0.1:{port}",
                worker_address="127.0.0.1:%port%",
                data_transfer_address="127.0.0.1:%dts_port%",
            )
            workers.append(service_lib.WorkerServer(config))
        yield f"grpc://127.0.0.1:{port}"
    finally:
        for server in [*workers, dispatcher]:
            server.stop()
