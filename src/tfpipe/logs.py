"""TensorFlow's start-up lines kept off the terminal unless they are asked for.

On a machine without a GPU, TensorFlow prints lines when it starts that a tfpipe user cannot act
on (no CUDA drivers, `failed call to cuInit`, CPU instructions, oneDNN). `quiet()`, unless
`TF_CPP_MIN_LOG_LEVEL` asks for them (is set to 0, 1 or 2):

- sets `TF_CPP_MIN_LOG_LEVEL=3`, which TensorFlow's C++ logging reads once, when it loads;
- holds back what TensorFlow writes to the stderr file descriptor while it is imported (C++
  logs from before absl's logging starts, which no variable turns off), and prints it if the
  import fails. A level set to 0-2 by the program after `quiet()` but before TensorFlow loads
  (`os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"` at the top of a script) is kept too.

Both must happen before TensorFlow loads, and Keras imports TensorFlow itself (on the JAX and
PyTorch backends it imports JAX if installed, which sets the level to 1 unless it is set). So the
package calls `quiet()` when the interpreter starts, before any import: its `tfpipe-quiet.pth`
in site-packages, run by `site`, holds the line `import tfpipe.logs; tfpipe.logs.quiet()`
(setup.py puts it in the wheel and the editable wheel). `import tfpipe` calls it too (a run
with `python -S`, or from a checkout on PYTHONPATH without the package installed). Every
Python process of the environment is then quiet, whether it uses tfpipe or not, and its child
processes inherit the level 3, which keeps them quiet the same way.

That start-up import is cheap: this module and `tfpipe/__init__.py` import nothing the
interpreter has not loaded already (not `typing`, `contextlib`, `tempfile` or `importlib.util`,
5-15 ms each, nor `__future__`). The file added 0.8 ms to `python -c pass` (median of 101 runs
each, alternating with and without it: 12.0 against 11.2 ms, and 16.1 against 15.3 ms in a
second round; installed wheel, 2 shared cores, 2026-11-29); `-X importtime` puts the two
modules at 0.6-0.8 ms. An editable install whose modules are not compiled (with
`PYTHONDONTWRITEBYTECODE=1`, before `make bytecode`) compiles the two at each start: ~5 ms.

`show()` (the CLI's `--verbose`) undoes `quiet()` before TensorFlow loads.
"""

import os
import sys

# typing.TYPE_CHECKING without importing typing (~14 ms), and annotations in quotes without
# importing __future__ (~0.2 ms, a fifth of what this module costs each start-up)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import IO, Any

LEVEL = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = "3"  # errors too: on a CPU machine `failed call to cuInit` is an error line


class HeldStderr:
    """Holds back what is written to the stderr file descriptor (C++ code too) in a `with`
    block; prints it if the block raises, drops it otherwise.

    Examples:
        >>> import tfpipe.logs
        >>> with tfpipe.logs.HeldStderr():
        ...     pass
    """

    def __enter__(self) -> None:
        import tempfile  # here, not above: the interpreter's start-up imports this module

        sys.stderr.flush()
        self.saved = os.dup(2)
        self.held: IO[bytes] = tempfile.TemporaryFile()
        os.dup2(self.held.fileno(), 2)

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        os.dup2(self.saved, 2)
        os.close(self.saved)
        with self.held:
            if error is not None:
                self.held.seek(0)
                sys.stderr.write(self.held.read().decode(errors="replace"))


class _QuietLoader:
    """TensorFlow's own loader, executing the module with stderr held back unless the level
    was set to show TensorFlow's lines since `quiet()`."""

    def __init__(self, loader: "Loader") -> None:
        self.loader = loader

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        return self.loader.create_module(spec)

    def exec_module(self, module: "ModuleType") -> None:
        if _finder in sys.meta_path:  # TensorFlow loads once: no later import needs it
            sys.meta_path.remove(_finder)
        if os.environ.get(LEVEL) != QUIET_LEVEL:
            self.loader.exec_module(module)
            return
        with HeldStderr():
            self.loader.exec_module(module)

    def __getattr__(self, name: str) -> "Any":  # get_data, is_package, ... of the real loader
        return getattr(self.loader, name)


class _QuietTensorFlowImport:
    """Finds `tensorflow` as usual and has it imported with stderr held back: a meta path
    finder (importlib.abc's base class would cost the start-up 15 ms). It stays until
    TensorFlow is imported, as a search alone (`importlib.util.find_spec("tensorflow")`, which
    `import torch._dynamo` runs) loads nothing."""

    searching = False  # while it asks the other finders

    def find_spec(
        self, fullname: str, path: "Sequence[str] | None", target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        if fullname != "tensorflow" or self.searching:
            return None
        import importlib.util  # here, not above: the interpreter's start-up imports this module

        self.searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.searching = False
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)  # type: ignore[assignment]  # duck-typed
        return spec


_finder = _QuietTensorFlowImport()


def quiet() -> None:
    """Keeps TensorFlow's start-up lines off stderr unless `TF_CPP_MIN_LOG_LEVEL` is set below
    3 (called when the interpreter starts, by the installed `tfpipe-quiet.pth`, and by
    `import tfpipe`).

    Examples:
        >>> import tfpipe.logs
        >>> tfpipe.logs.quiet()
    """
    if "tensorflow" in sys.modules or _finder in sys.meta_path:
        return
    if os.environ.setdefault(LEVEL, QUIET_LEVEL) == QUIET_LEVEL:
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
