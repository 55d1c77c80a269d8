"""The input position of a loader, and what it is valid for.

A position is `(epoch, batch)`: the next batch to train on. The order of an epoch is a pure
function of `(seed, epoch)`, so the position needs no buffers: `Pipeline.start_at` and
`SequenceLoader.start_at` rebuild the same batches from it. It is only valid for the same
data, batch size and seed: `Identity` holds those, and `Identity.differences` names what
changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

from tfpipe.checks import check_int


@dataclasses.dataclass(frozen=True)
class Identity:
    """What an input position is valid for: the data, the batch size and the seed.

    Attributes:
        data: a digest of what identifies the examples and their order: for TFRecords the
            file names, sizes and CRC-32C digests (from the metadata; files without metadata
            have none) and the example count; for in-memory sources the example count and
            every column's values (image paths, labels, arrays). The contents of image files
            are not read: an image replaced under the same path is the same example.
        description: the data in words, for messages.
        batch_size: examples per batch.
        seed: the seed of the per-epoch orders.
        echo: the `Pipeline.echo` factor, unit and window ("2 per example, window 1024"); ""
            without echo (and in backups saved before echoing existed).
    """

    data: str
    description: str
    batch_size: int
    seed: int
    echo: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The identity as JSON-ready values."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Identity:
        """The identity `to_dict` gave."""
        return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})

    def differences(self, other: Identity) -> list[str]:
        """What differs from `other` (a saved identity), one phrase per difference."""
        found = []
        if self.data != other.data and self.description == other.description:
            found.append(
                f"dataset: {self.description} holds other examples than when the backup was "
                "saved (the same names and counts, other contents: CRC-32C digests of the "
                "files, image paths or labels differ; e.g. written again with another seed)"
            )
        elif self.data != other.data:
            found.append(f"dataset: saved {other.description}, now {self.description}")
        for name in ("batch_size", "seed"):
            if getattr(self, name) != getattr(other, name):
                found.append(f"{name}: saved {getattr(other, name)}, now {getattr(self, name)}")
        if self.echo != other.echo:
            found.append(f"echo: saved {other.echo or 'none'}, now {self.echo or 'none'}")
        return found


def digest(parts: Iterable[bytes | str]) -> str:
    """A short hex digest of `parts`, each length-prefixed so that no two lists collide."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()[:32]


def check_position(epoch: Any, batch: Any, batches: int | None) -> tuple[int, int]:
    """`(epoch, batch)` as ints, with `batch` inside an epoch of `batches` batches when known."""
    epoch = check_int("epoch", epoch, minimum=0)
    batch = check_int("batch", batch, minimum=0)
    if batches is not None and batch >= batches:
        raise ValueError(
            f"batch must be less than the {batches} batches of an epoch (the next epoch starts "
            f"at epoch={epoch + 1}, batch=0). Received: batch={batch}"
        )
    return epoch, batch
