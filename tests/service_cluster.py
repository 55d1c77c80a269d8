"""Servers of the tf.data service for the tests: `tfpipe service` subprocesses, and a bound on
every wait on them.

Servers listen on free ports and announce 127.0.0.1; every wait on them is bounded, and every
server a test starts is stopped in a `finally` (subprocesses by killing their process group).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

WAIT_S = 60.0  # any single wait on the service; a hang fails the test instead of blocking it


def bounded(fn: Callable[[], Any], seconds: float = WAIT_S) -> Any:
    """`fn()`, or a failed test when it has not returned after `seconds`."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the tf.data service did not answer within {seconds:.0f} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


# A server process imports the `tfpipe` command's code, then reads its arguments from stdin and
# runs `tfpipe.cli.parser.main` on them (what `python -m tfpipe` runs): the servers of a test
# import TensorFlow side by side, and a worker restarted after a kill is up at once, as a
# supervisor's would be, not after ~10 s of imports while training waits for it.
WARM_SERVER = """
import json, sys
from tfpipe.cli import commands, parser
sys.exit(parser.main(json.loads(sys.stdin.readline())))
"""


class Cluster:
    """`tfpipe service` servers run as subprocesses, each in its own process group; `spares`
    processes start importing at once, each becoming the next server `start`ed."""

    def __init__(self, spares: int) -> None:
        self.servers: dict[str, subprocess.Popen[str]] = {}
        self.addresses: dict[str, str] = {}
        self.spares = [self._spawn() for _ in range(spares)]

    @staticmethod
    def _spawn() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", WARM_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )

    def start(self, name: str, *args: str) -> subprocess.Popen[str]:
        server = self.spares.pop(0) if self.spares else self._spawn()
        server.stdin.write(json.dumps(["service", *args, "--host", "127.0.0.1"]) + "\n")  # type: ignore[union-attr]
        server.stdin.close()  # type: ignore[union-attr]
        self.servers[name] = server
        return server

    def address(self, name: str) -> str:
        """The address the server printed when it started listening."""
        line = bounded(self.servers[name].stdout.readline)  # type: ignore[union-attr]
        assert "listening at" in line, f"{name} printed {line!r}"
        self.addresses[name] = str(line.split()[-1])
        return self.addresses[name]

    def kill(self, name: str) -> None:
        os.killpg(self.servers[name].pid, signal.SIGKILL)
        self.servers[name].wait(WAIT_S)

    def stop_all(self) -> None:
        for server in [*self.servers.values(), *self.spares]:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(WAIT_S)


def dispatcher_and_two_workers(cluster: Cluster) -> tuple[str, str]:
    """Starts a dispatcher and two workers (their addresses in `cluster.addresses`); returns
    the addresses of the dispatcher and of worker 0."""
    cluster.start("dispatcher", "dispatcher", "--port", "0")
    dispatcher = cluster.address("dispatcher")
    for name in ("worker0", "worker1"):
        cluster.start(name, "worker", "--dispatcher", dispatcher)
    cluster.address("worker1")
    return dispatcher, cluster.address("worker0")


def names_a_stopped_worker(message: str, address: str, listed: list[str]) -> None:
    """`message` names the dispatcher at `address` and one worker of `listed` that no longer
    accepts connections (the one stopped)."""
    found = re.search(r"worker\(s\) \['([\d.:]+)'\] of \[.+\] registered there no longer", message)
    assert address in message and found is not None and found[1] in listed, message
    host, port = found[1].rsplit(":", 1)
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), 5).close()


def check_lost_worker_named(
    error: BaseException | str, dispatcher: str, worker: str, timeout: float
) -> None:
    """The error (or its message) names the dispatcher, the lost worker (and only it) and how
    to restart it."""
    message = str(error)
    assert message.startswith(f"tf.data service stalled: at {dispatcher}"), message
    assert f"worker(s) {[worker]!r} of " in message, message
    assert f"(distribute(timeout={timeout:g}))" in message, message
    target = dispatcher.removeprefix("grpc://")
    assert f"restart it at the same address (`tfpipe service worker --dispatcher {target}" in (
        message
    )
