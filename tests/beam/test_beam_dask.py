"""tfpipe.beam on Beam's DaskRunner, against a 2-process `dask.distributed.LocalCluster` on
loopback started (on free ports) and closed here: the shards `write_tfrecords` writes, byte
for byte; errors by name and skips counted as on the DirectRunner."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("apache_beam")
pytest.importorskip("distributed")

import distributed

import tfpipe
import tfpipe.beam
from tfpipe.cli.parser import main
from tfpipe.errors import EncodeError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo
from tfpipe.sources.synthetic import make_image_folder

# A write here takes ~10-30 s on 2 shared cores (each worker imports TensorFlow once).
RUN_SECONDS = 240


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of a LocalCluster of 2 worker processes on 127.0.0.1; the cluster is closed
    after the module's tests, and any worker process still alive then is killed by its pid."""
    pids: list[int] = []
    try:
        with (
            distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                scheduler_port=0,
                dashboard_address=None,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            pids += client.run(os.getpid).values()
            yield cluster.scheduler_address
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # ended by the cluster, as it should be
                os.kill(pid, signal.SIGKILL)


def _within(seconds: float, run: Callable[[], Any]) -> Any:
    """What `run()` returns, failing the test if it takes longer than `seconds` (the fixture
    then closes the cluster, which ends the run)."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(run).result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"the write on Dask took more than {seconds} s")
    finally:
        pool.shutdown(wait=False)


def _on_dask(scheduler: str, source: Any, prefix: Path, **options: Any) -> DatasetInfo:
    args = [f"--dask_client_address={scheduler}"]
    return _within(
        RUN_SECONDS,
        lambda: tfpipe.beam.write_tfrecords(source, prefix, runner="dask", args=args, **options),
    )


def _bytes(info: DatasetInfo) -> list[bytes]:
    return [f.read_bytes() for f in info.files]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dask")
    return make_image_folder(root / "images", num_classes=3, per_class=30, size=(16, 16))


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_dask_writes_the_bytes_write_tfrecords_writes(
    scheduler: str, images: Path, tmp_path: Path, shuffle: bool
) -> None:
    source = tfpipe.from_directory(images, image_shape=(16, 16, 3))
    options: dict[str, Any] = {"num_shards": 4, "shuffle": shuffle, "seed": 5}
    dask = _on_dask(scheduler, source, tmp_path / "dask" / "train", **options)
    local = tfpipe.write_tfrecords(source, tmp_path / "local" / "train", progress=False, **options)
    assert dask.num_examples == local.num_examples == 90
    assert [s.file for s in dask.shards] == [s.file for s in local.shards]
    assert _bytes(dask) == _bytes(local)
    assert dask.shards == local.shards  # counts, sizes and digests
    assert sorted(p.name for p in (tmp_path / "dask").iterdir()) == [
        *(s.file for s in dask.shards),
        "train.json",
    ]


@pytest.mark.slow
@pytest.mark.fault(
    "a corrupt JPEG and an image deleted after the source listed it, in a Beam write on Dask",
    reader="tfpipe.beam.write_tfrecords (DaskRunner)",
    outcome="EncodeError naming the file, no metadata; with on_error='skip' both counted and "
    "listed in the metadata as write_tfrecords lists them",
)
def test_dask_names_errors_and_counts_skips_as_write_tfrecords(
    scheduler: str, tmp_path: Path
) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=2, per_class=20, size=(16, 16))
    source = tfpipe.from_directory(folder)  # JPEGs copied as they are, each checked
    broken, gone = sorted((folder / "circle").iterdir())[3:5]
    broken.write_bytes(b"not a JPEG")
    gone.unlink()
    prefix = tmp_path / "dask" / "train"
    with pytest.raises(EncodeError, match=f"{broken.name}|{gone.name}"):  # the first one met
        _on_dask(scheduler, source, prefix)
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []

    options: dict[str, Any] = {"num_shards": 3, "shuffle": False, "on_error": "skip"}
    with pytest.warns(TfpipeWarning, match="skipped 2 of 40"):
        dask = _on_dask(scheduler, source, prefix, **options)
    with pytest.warns(TfpipeWarning, match="skipped 2 of 40"):
        local = tfpipe.write_tfrecords(
            source, tmp_path / "local" / "train", progress=False, **options
        )
    assert dask.num_examples == local.num_examples == 38
    assert [(s.index, s.origin) for s in dask.skipped] == [(3, str(broken)), (4, str(gone))]
    assert dask.skipped[1] == local.skipped[1]  # (PIL names a BytesIO object in the first)
    assert _bytes(dask) == _bytes(local)


@pytest.mark.slow
def test_cli_writes_on_a_dask_scheduler(
    scheduler: str, images: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tfpipe write --runner dask --dask-address HOST:PORT` (here, in this process: a fresh
    process's first `from tfpipe import beam` is test_beam's CLI test)."""
    out = tmp_path / "cli" / "train"
    command = ["write", str(images), str(out)]
    address = scheduler.removeprefix("tcp://")
    argv = [*command, "--runner", "dask", "--dask-address", address, "--shards", "2"]
    assert _within(RUN_SECONDS, lambda: main(argv)) == 0
    assert "90 examples" in capsys.readouterr().out
    info = DatasetInfo.load(out)
    assert (info.num_examples, info.shuffled, len(info.shards)) == (90, True, 2)
    assert tfpipe.verify(out, progress=False).ok
    with pytest.raises(SystemExit) as refused:
        main([*command, "--dask-address", address])
    assert refused.value.code == 2
    assert "--dask-address needs --runner dask" in capsys.readouterr().err
