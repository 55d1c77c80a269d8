"""Where a `Pipeline` hands its expensive part to the tf.data service (`Pipeline.distribute`).

    this process: build the graph ──register──▶ dispatcher ──splits──▶ workers: read, parse,
    decode, map, batch ──gRPC──▶ this process: rebatch, repeat, prefetch ──▶ model.fit

Built on `tf.data.experimental.service.distribute`, never around it: the dispatcher hands out
*splits* (TFRecord files, or example indices of an in-memory source) and each worker runs the
stages before the split point on the splits it receives.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from typing import Any

import tensorflow as tf

from tfpipe.errors import SourceError

# `ShardingPolicy` by tfpipe mode name. DYNAMIC gives each split to one worker per epoch (at
# most once: a worker that fails loses the rest of the splits it was reading); OFF makes every
# worker read the whole data.
MODES = {
    "dynamic": tf.data.experimental.service.ShardingPolicy.DYNAMIC,
    "off": tf.data.experimental.service.ShardingPolicy.OFF,
}
_ADDRESS = re.compile(
    r"^(?:(?P<protocol>[a-z+]+)://)?(?P<host>[^:/\s\[\]]+|\[[0-9a-fA-F:.]+\]):(?P<port>\d+)$"
)
_PROTOCOLS = ("grpc",)
_CONNECT_S = 5.0


def grpc_address(argument: str, value: Any) -> str:
    """`value` ("grpc://HOST:PORT" or "HOST:PORT") as "grpc://HOST:PORT"; else a ValueError
    naming `argument`."""
    found = _ADDRESS.match(value) if isinstance(value, str) else None
    protocol = (found.group("protocol") or "grpc") if found else None
    if found is None or protocol not in _PROTOCOLS or not 0 < int(found.group("port")) < 65536:
        raise ValueError(
            f"{argument} must be the dispatcher's address 'grpc://HOST:PORT' or 'HOST:PORT' "
            "(what `tfpipe service dispatcher` prints), e.g. 'grpc://10.0.0.5:5050'. "
            f"Received: {argument}={value!r}"
        )
    return f"{protocol}://{found.group('host')}:{found.group('port')}"


@dataclasses.dataclass(frozen=True)
class DataService:
    """A tf.data service dispatcher and how the Pipeline shares its data among the workers.

    Attributes:
        address: the dispatcher, `"grpc://HOST:PORT"`.
        mode: "dynamic" (each file, or example of an in-memory source, goes to one worker per
            epoch) or "off" (every worker reads all the data).
        job_name: trainers iterating a Pipeline with the same job name share one job (and so
            split the data among them); None gives every iteration a job of its own.
    """

    address: str
    mode: str = "dynamic"
    job_name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", grpc_address("service", self.address))
        if self.mode not in MODES:
            raise ValueError(
                f"mode must be one of {sorted(MODES)}: 'dynamic' for training (each example "
                "once per epoch while no worker fails), 'off' to have every worker read all "
                f"the data. Received: mode={self.mode!r}"
            )
        if self.job_name is not None and (not isinstance(self.job_name, str) or not self.job_name):
            raise ValueError(
                f"job_name must be a non-empty str or None. Received: job_name={self.job_name!r}"
            )

    def describe(self, splits: str) -> str:
        """The label of the distribute stage in `Pipeline.explain()`."""
        if self.mode == "dynamic":
            how = (
                f"dynamic sharding: each of {splits} goes to one worker per epoch; a worker that "
                "fails loses the rest of its splits for that epoch"
            )
        else:
            how = "no sharding: every worker reads all the data, so k workers give k copies"
        job = "" if self.job_name is None else f", shared job {self.job_name!r}"
        return (
            f"distribute: the stages above run on the tf.data service workers of {self.address} "
            f"({how}{job}); the stages below run in this process"
        )

    def apply(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` read through the service, registered with the dispatcher now; batches
        travel uncompressed.

        TensorFlow retries an unreachable dispatcher for up to an hour, so the address is
        tried first: a `SourceError` names it when nothing listens there.
        """
        host, port = self.address.split("://", 1)[1].rsplit(":", 1)
        try:
            socket.create_connection((host.strip("[]"), int(port)), _CONNECT_S).close()
        except OSError as e:
            raise SourceError(
                f"distribute(service={self.address!r}): no tf.data service dispatcher answers "
                f"there ({e}). Start one with `tfpipe service dispatcher --port {port}` on "
                f"{host}, or pass the address it printed"
            ) from e
        return dataset.apply(
            tf.data.experimental.service.distribute(
                processing_mode=MODES[self.mode],
                service=self.address,
                job_name=self.job_name,
                # TensorFlow's default ("AUTO": snappy) made batches of float32 images 2-4x
                # slower to serve (benchmarks/bench_data_service.py); pixels compress poorly.
                compression=None,
            )
        )


class PassCounter:
    """Passes over a distributed dataset, one after another, counting each pass's examples.

    With dynamic sharding a pass is shorter when a service worker fails (the rest of its files
    are lost for that pass), so `tfpipe.fit` cannot trust a fixed number of steps to be one
    pass: it counts what every pass delivered, here in this process, and reports short ones.

    Args:
        passes: how many passes `repeat` yields at most.
    """

    def __init__(self, passes: int) -> None:
        self.passes = passes
        self._counts = tf.Variable(tf.zeros([passes], tf.int64), trainable=False)

    def repeat(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` repeated `passes` times (a new service job each pass), counted."""

        def counted(index: tf.Tensor, *batch: Any) -> Any:
            first = tf.nest.flatten(batch, expand_composites=False)[0]
            rows = first.nrows() if isinstance(first, tf.RaggedTensor) else tf.shape(first)[0]
            with tf.control_dependencies(
                [self._counts.scatter_nd_add([[index]], [tf.cast(rows, tf.int64)])]
            ):
                batch = tf.nest.map_structure(tf.identity, batch)
            return batch if len(batch) > 1 else batch[0]

        def one_pass(index: tf.Tensor) -> tf.data.Dataset:
            return dataset.map(lambda *batch: counted(index, *batch))

        return tf.data.Dataset.range(self.passes).flat_map(one_pass)

    def counts(self) -> list[int]:
        """Examples delivered by each pass started so far, in order (the last may be running)."""
        counts = [int(c) for c in self._counts.numpy()]
        started = [i for i, c in enumerate(counts) if c > 0]
        return counts[: started[-1] + 1] if started else []
