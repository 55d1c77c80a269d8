"""The `tfpipe` command."""

from tfpipe.cli.parser import main

__all__ = ["main"]
