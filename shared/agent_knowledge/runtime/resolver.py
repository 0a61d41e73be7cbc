"""Powertools' HTTP API resolver and `Response`, without the rest of its event handler package.

Python runs a package's `__init__` before any of its submodules, and two Powertools packages import
far more there than the HTTP API resolver uses, on every cold start:

- `aws_lambda_powertools.event_handler` imports every resolver it ships (AppSync, which pulls in
  asyncio, Bedrock, VPC Lattice, ...);
- `aws_lambda_powertools.utilities.data_classes` imports the event class of every AWS service
  (S3, Kinesis, SES, Connect, ...), where `api_gateway` needs the API Gateway, ALB, Lambda URL,
  Bedrock agent and VPC Lattice ones.

We register both packages without running their `__init__`. A name asked of one is then, for a
name its `__init__` re-exports from one of its submodules (`from .alb_event import ALBEvent`), that
submodule's object, or else the submodule of that name; any other name (`__all__` included) runs
the real `__init__` first, so the package stays complete for anyone else (`from
aws_lambda_powertools.event_handler import AppSyncResolver` works). If a package was already
imported, or its `__init__` is not a readable source file, the package is imported as usual.
Measured in bench/README.md ("Cold start").
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

PACKAGES = ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes")


def reexports(package_name: str, init_source: str) -> dict[str, tuple[str, str]]:
    """{name: (submodule, name in it)} for each `from .submodule import name [as alias]` (or the
    same import spelled absolutely) at the top level of the package's `__init__`."""
    found: dict[str, tuple[str, str]] = {}
    prefix = f"{package_name}."
    for node in ast.parse(init_source).body:
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.level == 1:
            submodule = node.module
        elif node.level == 0 and node.module.startswith(prefix):
            submodule = node.module[len(prefix) :]
        else:
            continue
        for alias in node.names:
            found[alias.asname or alias.name] = (submodule, alias.name)
    return found


class _LazyPackage(ModuleType):
    """A package whose `__init__` has not run. Importing a submodule binds it on its package; where
    `__init__` re-exports an object under the submodule's own name (`event_source`), the package
    keeps the object, as the real `__init__` would leave it."""

    _reexports: dict[str, tuple[str, str]]

    def __setattr__(self, name: str, value: Any) -> None:
        target = self.__dict__.get("_reexports", {}).get(name)
        if target is not None and isinstance(value, ModuleType) and target[0] == name and hasattr(value, target[1]):
            value = getattr(value, target[1])
        super().__setattr__(name, value)


def _register_lazily(package_name: str) -> None:
    if package_name in sys.modules:
        return
    spec = importlib.util.find_spec(package_name)
    origin = spec.origin if spec is not None else None
    if spec is None or spec.loader is None or origin is None or not origin.endswith(".py"):
        return  # imported as usual
    try:
        with open(origin, encoding="utf-8") as init_file:
            defined_in = reexports(package_name, init_file.read())
    except (OSError, UnicodeDecodeError, SyntaxError):
        return
    package = importlib.util.module_from_spec(spec)
    package.__class__ = _LazyPackage
    object.__setattr__(package, "_reexports", defined_in)
    loader = spec.loader
    # Only running the real `__init__` is serialized (the local server loads functions from several
    # threads); resolving one name imports one submodule, which the import system already guards.
    completing = threading.Lock()
    loading_thread: int | None = None

    def complete(name: str) -> Any:
        # PEP 562: called only for names the package does not have yet.
        if name in defined_in:
            submodule, original = defined_in[name]
            module = importlib.import_module(f"{package_name}.{submodule}")
            if hasattr(module, original):
                value = getattr(module, original)
                ModuleType.__setattr__(package, name, value)
                return value
        elif not name.startswith("__") and importlib.util.find_spec(f"{package_name}.{name}") is not None:
            return importlib.import_module(f"{package_name}.{name}")
        if name.startswith("__") and name != "__all__":
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}")
        return _run_init(name)

    def _run_init(name: str) -> Any:
        nonlocal loading_thread
        if loading_thread == threading.get_ident():  # asked by the `__init__` itself: not defined yet
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}")
        with completing:
            if package.__dict__.get("__getattr__") is complete:
                loading_thread = threading.get_ident()
                try:
                    loader.exec_module(package)
                finally:
                    loading_thread = None
                if package.__dict__.get("__getattr__") is complete:
                    del package.__dict__["__getattr__"]
                package.__class__ = ModuleType
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
