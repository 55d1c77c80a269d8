"""tfpipe's build: pyproject.toml holds everything but `tfpipe-quiet.pth`, which this adds.

`site` runs a `.pth` file's `import` lines when the interpreter starts, before the program's
first import, so TensorFlow's start-up lines stay quiet even when Keras, which imports
TensorFlow, is imported before tfpipe (`tfpipe.logs`). The file must be at the top of
site-packages, which no pyproject.toml setting of setuptools puts a file in, so a `build` step
writes it to the top of the wheel: to `build_lib`, which the wheel holds, or, for the editable
wheel (`pip install -e .`, PEP 660), to the folder setuptools' `editable_wheel` gives `install`
as `install_lib`, the editable wheel's top (it ships nothing from `build_lib` in its default
mode, where its own `__editable__.tfpipe-*.pth` puts `src` on `sys.path`). `site` reads the
files of a folder in sorted order, so `tfpipe-quiet.pth` comes after that one. A sub-command
of its own rather than a `build_py` that also copies the file (as some packages do):
`editable_wheel` runs a replaced `build_py` so that its errors become a warning, and the
editable install would then lack the file without failing.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import Command, setup
from setuptools.command.build import build

PTH = "tfpipe-quiet.pth"
PTH_TEXT = """\
# tfpipe: keeps TensorFlow's start-up lines off the terminal (see tfpipe.logs).
import tfpipe.logs; tfpipe.logs.quiet()
"""


class build_pth(Command):
    """Writes `tfpipe-quiet.pth` at the top of the wheel (a `build` sub-command)."""

    description = f"write {PTH} at the top of the wheel"
    user_options: list[tuple[str, str | None, str]] = []  # noqa: RUF012 (distutils' API)
    editable_mode = False  # setuptools sets it when it builds the editable wheel

    def initialize_options(self) -> None:
        self.build_lib: str | None = None

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"))

    def run(self) -> None:
        top = self.build_lib
        if self.editable_mode:
            top = self.get_finalized_command("install").install_lib
        Path(top, PTH).write_text(PTH_TEXT, encoding="utf-8")

    def get_outputs(self) -> list[str]:
        """What `build_lib` gets: nothing in an editable build (a strict one links those)."""
        return [] if self.editable_mode else [str(Path(self.build_lib, PTH))]

    def get_source_files(self) -> list[str]:
        return []


class build_with_pth(build):
    """setuptools' `build`, and then `build_pth`."""

    sub_commands = [*build.sub_commands, ("build_pth", None)]  # noqa: RUF012 (distutils' API)


setup(cmdclass={"build": build_with_pth, "build_pth": build_pth})
