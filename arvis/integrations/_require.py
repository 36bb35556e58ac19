"""What an integration says when its framework is not installed."""

from __future__ import annotations

import importlib


def require(integration: str, extra: str, *modules: str) -> None:
    """Import ``modules``, or raise an ImportError that names the extra to install."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(
                f"arvis.integrations.{integration} needs {module}: pip install 'arvis[{extra}]'"
            ) from exc
