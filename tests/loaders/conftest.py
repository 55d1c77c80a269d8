"""Fixtures of the loader tests: a tf.data service to distribute pipelines on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import tensorflow as tf

service_lib = tf.data.experimental.service


@contextlib.contextmanager
def in_process_servers() -> Iterator[tuple[str, list[Any]]]:
    """An in-process dispatcher with 2 workers: its address and the workers, stopped at
    the end."""
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
        yield f"grpc://127.0.0.1:{port}", workers
    finally:
        for server in [*workers, dispatcher]:
            server.stop()


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """An in-process dispatcher with 2 workers, shared by a module's tests; its address."""
    with in_process_servers() as (address, _):
        yield address


@pytest.fixture
def in_process() -> Iterator[tuple[str, list[Any]]]:
    """An in-process dispatcher with 2 workers of a test's own (it may stop them): the
    dispatcher's address and the workers."""
    with in_process_servers() as servers:
        yield servers
