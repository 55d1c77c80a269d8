"""The package keeps the shape issue 25 gave it: imports run down the layers of the data flow,
nothing underscored crosses a module line, no import cycle, short modules and functions, and a
top level of a few modules.

Every import counts wherever it is written: at the top, inside a function, under
`if TYPE_CHECKING:`, or as `importlib.import_module("tfpipe...")` with a literal name.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "tfpipe"

# The data flow, lowest first: a module imports only from its own layer or lower ones. The
# package itself (`tfpipe/__init__.py`) and `__main__` are in the top layer.
LAYERS: list[set[str]] = [
    {"errors", "checks", "fs", "logs"},  # logs: TensorFlow's start-up lines (issue 26)
    {"features"},
    {"schema"},
    {"labels"},
    {"format"},
    {"sources"},
    {"records"},
    {"distribute"},
    {"loaders"},
    {"training"},
    {"cli", "beam", "spark"},
]
MOST_MODULE_LINES = 700
MOST_FUNCTION_LINES = 80  # lines of code: docstrings, comments and blank lines not counted
MOST_TOP_LEVEL_MODULES = 10
MOST_POSITIONAL_ARGUMENTS = 4  # in a call; the rest are passed by keyword (issue 40)


@dataclasses.dataclass(frozen=True)
class Import:
    """One import of a tfpipe module: who imports, the module imported, the names taken from
    it (empty for `import tfpipe.x`), and the line."""

    importer: str
    module: str
    names: tuple[str, ...]
    line: int


def parse(path: Path) -> ast.Module:
    module = nodes(path)[0]
    assert isinstance(module, ast.Module)
    return module


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's tree, the module first (as `ast.walk` gives them)."""
    return walked(path.read_text())


@functools.cache
def walked(text: str) -> tuple[ast.AST, ...]:
    """Parsed and walked once per text: a copy of the package to break shares the nodes of
    the modules it leaves alone."""
    return tuple(ast.walk(ast.parse(text)))


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = SRC) -> dict[str, Path]:
    """Every module of the package under `root`, by its dotted name."""
    return {module_name(path, root): path for path in sorted((root / "tfpipe").rglob("*.py"))}


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    """The tfpipe modules `name` imports; `from tfpipe.x import y` is an import of the module
    `tfpipe.x.y` when there is one, else of `tfpipe.x` (taking the name y)."""
    package = package_of(name, path)
    for node in nodes(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tfpipe":
                    yield Import(name, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node, package)
            if base.split(".")[0] != "tfpipe":
                continue
            taken = [a.name for a in node.names if f"{base}.{a.name}" not in known]
            if taken:
                yield Import(name, base, tuple(taken), node.lineno)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    yield Import(name, f"{base}.{alias.name}", (), node.lineno)
        elif literal := imported_by_importlib(node):
            yield Import(name, literal, (), node.lineno)


def package_of(name: str, path: Path) -> str:
    """The package relative imports in module `name` start from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, with relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*parts, *([node.module] if node.module else [])])


def imported_by_importlib(node: ast.AST) -> str | None:
    """The module of `importlib.import_module("tfpipe...")` with a literal name, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    if node.func.attr != "import_module" or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value if first.value.split(".")[0] == "tfpipe" else None
    return None


def layer(module: str) -> int:
    """The layer of a module: that of its top-level package or module under tfpipe. The package
    itself (its lazy public names) and `__main__` sit at the top, with the command line."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return len(LAYERS) - 1
    found = [i for i, names in enumerate(LAYERS) if parts[1] in names]
    assert found, f"{module}: give tfpipe.{parts[1]} a place in LAYERS"
    return found[0]


@functools.cache
def all_imports(root: Path = SRC) -> list[Import]:
    known = modules(root)
    return [found for name, path in known.items() for found in imports(name, path, known)]


def upward_imports(root: Path = SRC) -> list[str]:
    return [
        f"upward import of {i.module} in {i.importer} (line {i.line})"
        for i in all_imports(root)
        if layer(i.module) > layer(i.importer)
    ]


def private_imports(root: Path = SRC) -> list[str]:
    """Underscored names or modules imported from another module, and `module._name` used
    through an imported tfpipe module."""
    found = []
    for i in all_imports(root):
        if i.module == i.importer:
            continue
        hidden = [p for p in i.module.split(".") if p.startswith("_") and p != "__main__"]
        hidden += [n for n in i.names if n.startswith("_") and not n.startswith("__")]
        found += [
            f"private import of {n} from {i.module} in {i.importer} (line {i.line})" for n in hidden
        ]
    known = modules(root)
    for name, path in known.items():
        found += private_attributes(name, path, known)
    return found


def private_attributes(name: str, path: Path, known: dict[str, Path]) -> list[str]:
    """`alias._name` in `name`, where alias is a tfpipe module it imported."""
    aliases = {}
    for node in nodes(path):
        if isinstance(node, ast.ImportFrom):
            base = absolute(node, package_of(name, path))
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tfpipe") and alias.asname:
                    aliases[alias.asname] = alias.name
    return [
        f"private use of {aliases[node.value.id]}.{node.attr} in {name} (line {node.lineno})"
        for node in nodes(path)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]


def cycles(root: Path = SRC) -> list[str]:
    """One line per import cycle between modules, as the chain of its modules."""
    graph: dict[str, set[str]] = {}
    for i in all_imports(root):
        if i.module != i.importer:
            graph.setdefault(i.importer, set()).add(i.module)
    found: set[tuple[str, ...]] = set()
    for start in graph:
        if chain := shortest_cycle(start, graph):
            at = chain.index(min(chain))  # one rotation per cycle
            found.add(tuple(chain[at:] + chain[:at]))
    return ["cycle " + " -> ".join([*chain, chain[0]]) for chain in sorted(found)]


def shortest_cycle(start: str, graph: dict[str, set[str]]) -> list[str]:
    """The shortest import chain from `start` back to itself (breadth first), or []."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph.get(module, ())):
                if target == start:
                    chain = [module]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return chain[::-1]
                if target not in previous:
                    previous[target] = module
                    following.append(target)
        frontier = following
    return []


Function = ast.FunctionDef | ast.AsyncFunctionDef


def code_lines(node: Function, lines: list[str]) -> int:
    """Lines of code in a function: not its docstring, comments or blank lines."""
    skip: set[int] = set()
    first = node.body[0]
    if ast.get_docstring(node, clean=False) is not None:
        skip = set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    numbers = range(node.lineno, (node.end_lineno or node.lineno) + 1)
    return sum(
        1
        for n in numbers
        if n not in skip and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")
    )


@functools.cache
def long_code(root: Path = SRC) -> list[str]:
    """`long module M (N lines)` and `long function M.Class.f (N lines of code)`."""
    found = []
    for name, path in modules(root).items():
        lines = path.read_text().splitlines()
        if len(lines) > MOST_MODULE_LINES:
            found.append(f"long module {name} ({len(lines)} lines)")
        for qualified, node in functions(parse(path), name):
            if (count := code_lines(node, lines)) > MOST_FUNCTION_LINES:
                found.append(f"long function {qualified} ({count} lines of code)")
    return found


def functions(tree: ast.AST, prefix: str) -> Iterator[tuple[str, Function]]:
    """Every function in `tree` with its qualified name (`module.Class.method`)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}.{node.name}", node
            yield from functions(node, f"{prefix}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}.{node.name}")
        else:
            yield from functions(node, prefix)


def crowded_top_level(root: Path = SRC) -> list[str]:
    """The modules at the top of the package, when there are too many of them."""
    names = sorted(path.name for path in (root / "tfpipe").glob("*.py"))
    return names if len(names) > MOST_TOP_LEVEL_MODULES else []


def test_imports_run_down_the_layers() -> None:
    assert upward_imports() == []


def test_nothing_underscored_crosses_a_module_line() -> None:
    assert private_imports() == []


def test_no_import_cycle() -> None:
    assert cycles() == []


def test_modules_and_functions_are_short() -> None:
    assert long_code() == []


def test_the_top_level_holds_few_modules() -> None:
    assert crowded_top_level() == []


# Each rule, broken on purpose in a copy of the package, fails.


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of src/tfpipe under tmp_path/src, to break."""
    shutil.copytree(PACKAGE, tmp_path / "src" / "tfpipe", ignore=shutil.ignore_patterns("*.pyc"))
    return tmp_path / "src"


def add_line(root: Path, module: str, line: str) -> None:
    path = root / "tfpipe" / module
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.parametrize(
    "line",
    [
        "from tfpipe.loaders.pipeline import Pipeline",
        "import tfpipe.training.fit",
        "def later():\n    from tfpipe.cli import main",
        "import typing\nif typing.TYPE_CHECKING:\n    from tfpipe.records import verify",
        "import importlib\nimportlib.import_module('tfpipe.sources')",
        "from ..training import fit",
    ],
    ids=["from", "import", "in-a-function", "type-checking", "importlib", "relative"],
)
def test_an_upward_import_fails(package_copy: Path, line: str) -> None:
    add_line(package_copy, "features/base.py", line)
    assert len(upward_imports(package_copy)) == 1


@pytest.mark.parametrize(
    "line",
    [
        "from tfpipe.features.base import _where",
        "from tfpipe.features import _private_module",
        "import tfpipe.errors as errors_module\nerrors_module._TF_PREFIX",
    ],
    ids=["name", "module", "attribute"],
)
def test_an_underscored_import_fails(package_copy: Path, line: str) -> None:
    (package_copy / "tfpipe" / "features" / "_private_module.py").write_text("")
    add_line(package_copy, "schema.py", line)
    assert len(private_imports(package_copy)) == 1


def test_an_import_cycle_fails(package_copy: Path) -> None:
    add_line(package_copy, "errors.py", "def later():\n    from tfpipe import fs")
    add_line(package_copy, "fs.py", "from tfpipe.errors import TfpipeError")
    assert cycles(package_copy) == ["cycle tfpipe.errors -> tfpipe.fs -> tfpipe.errors"]


def test_a_long_module_or_function_fails(package_copy: Path) -> None:
    body = "".join(f"    x{i} = {i}  # code\n" for i in range(MOST_FUNCTION_LINES + 1))
    add_line(package_copy, "errors.py", f'def long():\n    """Doc."""\n{body}')
    add_line(package_copy, "fs.py", "\n" * MOST_MODULE_LINES)
    found = long_code(package_copy)
    assert [line.split(" (")[0] for line in found] == [
        "long function tfpipe.errors.long",
        "long module tfpipe.fs",
    ]


def test_a_function_of_docstrings_and_comments_is_not_long(package_copy: Path) -> None:
    body = "".join(f"    # note {i}\n\n" for i in range(MOST_FUNCTION_LINES))
    doc = "\n".join(["    " + "doc"] * MOST_FUNCTION_LINES)
    add_line(
        package_copy, "errors.py", f'def short():\n    """Doc.\n{doc}\n    """\n{body}    x = 1'
    )
    assert long_code(package_copy) == long_code()


def test_too_many_top_level_modules_fail(package_copy: Path) -> None:
    for i in range(MOST_TOP_LEVEL_MODULES):
        (package_copy / "tfpipe" / f"extra{i}.py").write_text("")
    assert crowded_top_level(package_copy) != []


# Issue 40: each kind answers for itself, and each name means one thing.

# Classes whose kind only their own modules may test with isinstance: the feature kinds (their
# knowledge is their methods), the loaders' Pipeline inputs, and the kinds of training input
# fit is given (dispatched once, by `training.adapters.adapt` and the Pipeline's `make_input`).
KIND_CLASSES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(["Image", "Mask", "ClassLabel", "Tensor", "Text"], ("tfpipe.features",)),
    **dict.fromkeys(["RecordInput", "MemoryInput", "PyDatasetInput"], ("tfpipe.loaders.inputs",)),
    **dict.fromkeys(
        ["Pipeline", "SequenceLoader", "PyDataset", "Dataset", "SourceBase"],
        ("tfpipe.training.adapters", "tfpipe.loaders.inputs", "tfpipe.loaders.pipeline"),
    ),
}
# Classes of other libraries named like a kind above.
FOREIGN_CLASSES = {"tf.Tensor", "keras.layers.Pipeline"}
# Names that meant several things before issue 40 and must not come back as a class, a type
# alias or a module: each maps to where the one meaning lives now (empty: nowhere).
RETIRED_NAMES: dict[str, tuple[str, ...]] = {
    "Plan": (),
    "Input": (),
    "Step": (),
    "Transform": ("tfpipe.loaders.transforms",),
    "lookup": (),
    "locate": (),
    "bench": (),
    "servers": (),
    "plan": (),
    "shards": (),
}


def kind_checks(root: Path = SRC) -> list[str]:
    """`isinstance(x, K)` (K alone, in a tuple or a union, `module.K` too) outside the modules
    that may test kind K."""
    found = []
    for name, path in modules(root).items():
        for node in nodes(path):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
            ):
                continue
            for kind in class_names(node.args[1]):
                allowed = None if kind in FOREIGN_CLASSES else KIND_CLASSES.get(kind.split(".")[-1])
                if allowed is not None and not any(
                    name == home or name.startswith(home + ".") for home in allowed
                ):
                    found.append(f"isinstance on {kind} in {name} (line {node.lineno})")
    return found


def class_names(node: ast.AST) -> list[str]:
    """The classes an isinstance's second argument tests, as written: `K`, `m.K`, `(K, L)`,
    `K | L`."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [f"{base}.{node.attr}" for base in class_names(node.value)] or [node.attr]
    if isinstance(node, ast.Tuple):
        return [n for element in node.elts for n in class_names(element)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return class_names(node.left) + class_names(node.right)
    return []


def retired_names(root: Path = SRC) -> list[str]:
    """Classes, module-level type aliases and modules named with a retired name outside its
    one home."""
    found = []
    for name, path in modules(root).items():
        if (stem := name.rpartition(".")[2]) in RETIRED_NAMES and name not in RETIRED_NAMES[stem]:
            found.append(f"module {name}")
        for node in parse(path).body:
            defined = []
            if isinstance(node, ast.ClassDef):
                defined = [node.name]
            elif isinstance(node, ast.Assign):
                defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined = [node.target.id]
            found += [
                f"{n} in {name} (line {node.lineno})"
                for n in defined
                if n in RETIRED_NAMES and name not in RETIRED_NAMES[n]
            ]
    return found


def test_kinds_are_asked_not_checked() -> None:
    assert kind_checks() == []


def test_retired_names_stay_retired() -> None:
    assert retired_names() == []


@pytest.mark.parametrize(
    ("line", "count"),
    [
        ("from tfpipe.features import Image\nisinstance(1, Image)", 1),
        ("import tfpipe.features as f\nisinstance(1, (int, f.Mask))", 1),
        ("from tfpipe.features import ClassLabel, Text\nisinstance(1, ClassLabel | Text)", 2),
        ("import tensorflow as tf\nisinstance(1, tf.data.Dataset)", 1),
        ("import tensorflow as tf\nisinstance(1, tf.Tensor)", 0),
    ],
    ids=["alone", "module-tuple", "union", "input-kind", "tf-tensor-is-not-a-feature"],
)
def test_a_kind_check_outside_its_home_fails(package_copy: Path, line: str, count: int) -> None:
    add_line(package_copy, "labels.py", line)
    assert len(kind_checks(package_copy)) == count


@pytest.mark.parametrize(
    "line", ["class Plan:\n    pass", "Step = tuple[str, int]", "Input: type = int"]
)
def test_a_retired_name_fails(package_copy: Path, line: str) -> None:
    add_line(package_copy, "labels.py", line)
    assert len(retired_names(package_copy)) == 1


def test_a_retired_module_name_fails(package_copy: Path) -> None:
    (package_copy / "tfpipe" / "format" / "lookup.py").write_text("")
    assert retired_names(package_copy) == ["module tfpipe.format.lookup"]


# Issue 40: a call inside the package names its arguments past the first few.

# Callees of other libraries called with more positional arguments, as their APIs take them
# (matched on the call's function as written).
EXTERNAL_CALLEES = {
    "tf.random.stateless_uniform",  # loaders/assembly.py
    "super().__init__",  # loaders/workers.py: multiprocessing's Pool
    "beam.Map",  # beam/ptransforms.py: Beam passes the arguments after the function on
    "default",  # cli/parser.py: the `warnings.showwarning` it wraps, called as warnings calls it
}


def long_positional_calls(root: Path = SRC) -> list[str]:
    """Calls with more than MOST_POSITIONAL_ARGUMENTS positional arguments (`*args` not
    counted), but those of the external callees above."""
    found = []
    for name, path in modules(root).items():
        for node in nodes(path):
            if not isinstance(node, ast.Call):
                continue
            count = sum(not isinstance(arg, ast.Starred) for arg in node.args)
            if (
                count > MOST_POSITIONAL_ARGUMENTS
                and (callee := ast.unparse(node.func)) not in EXTERNAL_CALLEES
            ):
                found.append(
                    f"{count} positional arguments to {callee} in {name} (line {node.lineno})"
                )
    return found


def test_internal_calls_name_their_arguments() -> None:
    assert long_positional_calls() == []


@pytest.mark.parametrize(
    ("line", "count"),
    [
        ("def f(*a, **k):\n    return a\nf(1, 2, 3, 4, 5)", 1),
        ("def f(*a, **k):\n    return a\nf(1, 2, 3, 4, *range(9))", 0),
        ("def f(*a, **k):\n    return a\nf(1, 2, 3, 4, e=5)", 0),
        ("import apache_beam as beam\nbeam.Map(print, 1, 2, 3, 4)", 0),
    ],
    ids=["five", "starred", "keyword", "external"],
)
def test_a_call_of_many_positional_arguments_fails(
    package_copy: Path, line: str, count: int
) -> None:
    add_line(package_copy, "labels.py", line)
    assert len(long_positional_calls(package_copy)) == count
