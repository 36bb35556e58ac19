"""The ``arvis`` command (DESIGN §7): one module per command group.

``app`` wires the groups together; ``main`` is the console entry point.
"""

from arvis.cli.app import app, main

__all__ = ["app", "main"]
