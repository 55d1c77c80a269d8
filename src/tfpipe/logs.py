"""TensorFlow's start-up lines kept off the terminal unless they are asked for.

On a machine without a GPU, TensorFlow prints lines when it starts that a tfpipe user cannot act
on (no CUDA drivers, `failed call to cuInit`, CPU instructions, oneDNN). `import tfpipe` calls
`quiet()`, which, unless the user set `TF_CPP_MIN_LOG_LEVEL`:

- sets `TF_CPP_MIN_LOG_LEVEL=3`, which TensorFlow's C++ logging reads once, when it loads;
- holds back what TensorFlow writes to the stderr file descriptor while it is imported (C++
  logs from before absl's logging starts, which no variable turns off), and prints it if the
  import fails.

Both act only when tfpipe is imported before TensorFlow (`import tfpipe` before `import keras`).
`show()` (the CLI's `--verbose`) undoes them before TensorFlow loads.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

LEVEL = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = "3"  # errors too: on a CPU machine `failed call to cuInit` is an error line


@contextlib.contextmanager
def held_stderr() -> Iterator[None]:
    """Holds back what is written to the stderr file descriptor (C++ code too) in the block;
    prints it if the block raises, drops it otherwise."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, executing the module with stderr held back."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with held_stderr():
            self.loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # get_data, is_package, ... of the real loader
        return getattr(self.loader, name)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as usual, once, and has it imported with stderr held back."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


_finder = _QuietTensorFlowImport()


def quiet() -> None:
    """Keeps TensorFlow's start-up lines off stderr unless `TF_CPP_MIN_LOG_LEVEL` is set
    (called by `import tfpipe`).

    Examples:
        >>> import tfpipe.logs
        >>> tfpipe.logs.quiet()
    """
    if LEVEL in os.environ or "tensorflow" in sys.modules or _finder in sys.meta_path:
        return
    os.environ[LEVEL] = QUIET_LEVEL
    sys.meta_path.insert(0, _finder)


def show() -> None:
    """Undoes `quiet()`: TensorFlow, when it loads later, logs as it would without tfpipe.

    Examples:
        >>> import tfpipe.logs
        >>> tfpipe.logs.show()
    """
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
        if os.environ.get(LEVEL) == QUIET_LEVEL:
            del os.environ[LEVEL]
