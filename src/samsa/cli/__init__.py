"""The ``samsa`` command."""

from samsa.cli.main import main

__all__ = ["main"]
