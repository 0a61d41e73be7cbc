"""Powertools' HTTP API resolver and `Response`, without the rest of its event handler package.

Python runs a package's `__init__` before any of its submodules, and two Powertools packages import
far more there than the HTTP API resolver uses, on every cold start:

- `aws_lambda_powertools.event_handler` imports every resolver it ships (AppSync, which pulls in
  asyncio, Bedrock, VPC Lattice, ...);
- `aws_lambda_powertools.utilities.data_classes` imports the event class of every AWS service
  (S3, Kinesis, SES, Connect, ...), where `api_gateway` needs the API Gateway, ALB, Lambda URL,
  Bedrock agent and VPC Lattice ones.

We register both packages without running their `__init__`. A name asked of one is then the
submodule of that name, or, for a name its `__init__` re-exports (`from .alb_event import
ALBEvent`), the submodule that defines it; any other name runs the real `__init__` first, so the
package stays complete for anyone else (`from aws_lambda_powertools.event_handler import
AppSyncResolver` works). If a package was already imported in full (tests, the local server),
this changes nothing. Measured in bench/README.md ("Cold start").
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

PACKAGES = ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes")


def _reexports(init_source: str) -> dict[str, str]:
    """{name: submodule} for each `from .submodule import name` at the top level of `__init__`."""
    found: dict[str, str] = {}
    for node in ast.parse(init_source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def _register_lazily(package_name: str) -> None:
    if package_name in sys.modules:
        return
    spec = importlib.util.find_spec(package_name)
    if spec is None or spec.loader is None or spec.origin is None:  # pragma: no cover - a layer dependency
        raise ImportError(f"{package_name} is not installed")
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    with open(spec.origin, encoding="utf-8") as init_file:
        defined_in = _reexports(init_file.read())
    loading = False
    # One completion at a time: a thread asking while another runs the real `__init__` waits for it
    # (the local server loads functions from its request threads).
    lock = threading.RLock()

    def complete(name: str) -> Any:
        # PEP 562: called only for names the package does not have yet.
        with lock:
            return _complete(name)

    def _complete(name: str) -> Any:
        nonlocal loading
        if name in package.__dict__:  # completed by another thread meanwhile
            return package.__dict__[name]
        if loading or name.startswith("__"):
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}")
        if name in defined_in:  # re-exported: wins over a submodule of the same name, as in `__init__`
            module = importlib.import_module(f"{package_name}.{defined_in[name]}")
            if hasattr(module, name):
                value = getattr(module, name)
                setattr(package, name, value)  # importing the submodule bound its name to the module
                return value
        elif importlib.util.find_spec(f"{package_name}.{name}") is not None:
            return importlib.import_module(f"{package_name}.{name}")
        loading = True
        try:
            loader.exec_module(package)
        finally:
            loading = False
        package.__dict__.pop("__getattr__", None)
        return getattr(package, name)

    package.__getattr__ = complete  # type: ignore[method-assign]
    sys.modules[package_name] = package
    parent_name, _, child = package_name.rpartition(".")
    parent: ModuleType = importlib.import_module(parent_name)
    setattr(parent, child, package)


for _package in PACKAGES:
    _register_lazily(_package)

from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver, Response  # noqa: E402

__all__ = ["APIGatewayHttpResolver", "Response"]
