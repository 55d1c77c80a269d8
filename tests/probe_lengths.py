"""Probe lengths of a few hundred ms (the model alone before `tfpipe.fit` trains; the input
alone and its stages for the report), for the tests where their length is not under test."""

from __future__ import annotations

# module -> {attribute: seconds}
SHORT = {
    "tfpipe.training.model_probe": {"PROBE_SECONDS": 0.2},
    "tfpipe.training.fit": {"INPUT_PROBE_SECONDS": 0.3, "STAGE_PROBE_SECONDS": 0.3},
}


def short_source() -> str:
    """Python source that sets the `SHORT` lengths, e.g. in a notebook's kernel."""
    lines = ["import importlib"]
    for module, values in SHORT.items():
        for name, seconds in values.items():
            lines.append(f"importlib.import_module({module!r}).{name} = {seconds!r}")
    return "\n".join(lines)
