"""tfpipe: get training data into TensorFlow/Keras fast enough that the accelerator never waits.

The data flows one way: schema -> sources -> records -> loaders -> fit.

`tfpipe` exports the entry points a user calls. What they return and raise is exported by the
package that makes it: the errors and `TfpipeWarning` by `tfpipe.errors`, `DatasetInfo` and
`ResolvedData` by `tfpipe.format`, `VerifyReport` and `Fault` by `tfpipe.records`,
`FitReport` by `tfpipe.training`, `DataService` by `tfpipe.loaders`, `DistributedFeed` by
`tfpipe.distribute`.

`import tfpipe` is light: each public name is imported on first use (PEP 562), so that the
`tfpipe` command answers `--help` without importing TensorFlow. The first use also hides
TensorFlow's GPUs when Keras runs on another backend (JAX, PyTorch), which then trains on them
while TensorFlow reads the data (see `tfpipe.training.backend`). TensorFlow's start-up
lines stay off stderr unless `TF_CPP_MIN_LOG_LEVEL` is set below 3, whichever of tfpipe and
Keras is imported first: the installed package quiets them when the interpreter starts
(`tfpipe.logs`, which runs this module too, so it imports nothing heavy).
"""

from tfpipe import logs as _logs  # light: no TensorFlow

_logs.quiet()  # before TensorFlow is first imported (tfpipe-quiet.pth did, if installed)

if _logs.TYPE_CHECKING:  # the names of _MODULES, for type checkers and editors
    import typing  # here: `import tfpipe` binds no public name but those of __all__

    from tfpipe.features import ClassLabel, Feature, Image, Mask, Tensor, Text
    from tfpipe.loaders import DecodedExamples, Pipeline, SequenceLoader, augment
    from tfpipe.records import infer_schema, locate_fault, read_tfrecords, verify, write_tfrecords
    from tfpipe.schema import Schema
    from tfpipe.sources import Source, from_arrays, from_dataframe, from_directory, from_tfrecords
    from tfpipe.training.benchmark import benchmark
    from tfpipe.training.faults import named_errors
    from tfpipe.training.fit import fit

__version__ = "0.1.0"  # the one source: pyproject.toml reads it (setuptools dynamic)

# Each public name and the module it is imported from on first use: the module's attribute of
# that name, or the module itself when it has none (`augment`).
_MODULES = {
    "ClassLabel": "tfpipe.features",
    "DecodedExamples": "tfpipe.loaders",
    "Feature": "tfpipe.features",
    "Image": "tfpipe.features",
    "Mask": "tfpipe.features",
    "Pipeline": "tfpipe.loaders",
    "Schema": "tfpipe.schema",
    "SequenceLoader": "tfpipe.loaders",
    "Source": "tfpipe.sources",
    "Tensor": "tfpipe.features",
    "Text": "tfpipe.features",
    "augment": "tfpipe.loaders.augment",
    "benchmark": "tfpipe.training.benchmark",
    "fit": "tfpipe.training.fit",
    "from_arrays": "tfpipe.sources",
    "from_dataframe": "tfpipe.sources",
    "from_directory": "tfpipe.sources",
    "from_tfrecords": "tfpipe.sources",
    "infer_schema": "tfpipe.records",
    "locate_fault": "tfpipe.records",
    "named_errors": "tfpipe.training.faults",
    "read_tfrecords": "tfpipe.records",
    "verify": "tfpipe.records",
    "write_tfrecords": "tfpipe.records",
}

__all__ = sorted(["__version__", *_MODULES])  # the one list of public names: _MODULES


def __getattr__(name: str) -> "typing.Any":  # a string: typing is not imported
    """Imports a public name (or a submodule, as `tfpipe.records`) on first use."""
    import importlib.util  # here, not above: the interpreter's start-up imports this module

    module = _MODULES.get(name)
    if module is None:
        if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module = f"{__name__}.{name}"
    importlib.import_module("tfpipe.training.backend").data_only()
    imported = importlib.import_module(module)
    # A submodule is itself, never a global of the same name in it (`beam` in `tfpipe.beam`).
    value = getattr(imported, name, imported) if name in _MODULES else imported
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
