"""Powertools' HTTP API resolver and `Response`, without the rest of its event handler package.

`aws_lambda_powertools.event_handler/__init__.py` imports every resolver it ships (AppSync, which
pulls in asyncio, Bedrock, VPC Lattice, ...) and Python runs a package's `__init__` before any of
its submodules, so even `from aws_lambda_powertools.event_handler.api_gateway import ...` pays for
all of them on every cold start. We register the package without running its `__init__` and
import only `api_gateway`. The package stays complete for anyone else: the first attribute asked
of it (`from aws_lambda_powertools.event_handler import AppSyncResolver`) runs the real `__init__`.
If the package was already imported in full (tests, the local server), this changes nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

PACKAGE = "aws_lambda_powertools.event_handler"


def _register_package_lazily() -> None:
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None:  # pragma: no cover - Powertools is a layer dependency
        raise ImportError(f"{PACKAGE} is not installed")
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    loading = False

    def complete(name: str) -> Any:
        # PEP 562: called only for names the package does not have yet. A submodule
        # (`from aws_lambda_powertools.event_handler import content_types`, as api_gateway does) is
        # imported on its own; any other name needs the real `__init__`.
        nonlocal loading
        if loading or name.startswith("__"):
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
        if importlib.util.find_spec(f"{PACKAGE}.{name}") is not None:
            return importlib.import_module(f"{PACKAGE}.{name}")
        loading = True
        try:
            loader.exec_module(package)
        finally:
            loading = False
        del package.__dict__["__getattr__"]
        return getattr(package, name)

    package.__getattr__ = complete  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package
    parent: ModuleType = sys.modules["aws_lambda_powertools"]
    parent.event_handler = package  # type: ignore[attr-defined]


_register_package_lazily()

from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver, Response  # noqa: E402

__all__ = ["APIGatewayHttpResolver", "Response"]
