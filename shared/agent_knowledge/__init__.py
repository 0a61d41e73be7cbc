"""Agent knowledge protocol (`bailing.agent-knowledge.v1`) — the shared Lambda layer.

Where each part of the protocol lives (sections of docs/DESIGN.md):

    §2 identity, audience ............ identity/ (caller, audience)
    §3 knowledge scope revision ...... identity/scope
    §4 runs and managed tasks ........ identity/runs
    §5 references, cursors, errors ... references/ (codec, binding, server_token), errors
    §6 byte budgets .................. knowledge/ (search_budget, read_budget), wire, limits
    §7 HTTP surface .................. runtime/http (functions/*/app.py are thin handlers)
    §8 retrieval and validation ...... retrieval/, knowledge/search
    §9 turns ......................... turns/
    §10 ingestion and the index ...... ingest/ (write side; no query function imports it)
    storage .......................... repositories/ (the only code that touches boto3/botocore)

Root modules: `limits` (every protocol number), `errors` (the domain error ladder), `settings`,
`records` (stored records), `models` (API models), `wire` (exact JSON bytes and their cost).

Subpackages re-export their public names. `knowledge` and `turns` do it lazily (`lazy_exports`),
so importing one name never loads another function's dependencies (tantivy) at cold start, and so
does `runtime` (see its docstring); `identity` and `references` import their modules eagerly
(`references.server_token` brings in the repositories and botocore, which every function loads).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, names_by_submodule: dict[str, str]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` for a package that re-exports the names of its
    submodules (submodule → space-separated names), importing a submodule only when one of its
    names is first used."""
    exports = {name: submodule for submodule, names in names_by_submodule.items() for name in names.split()}

    def __getattr__(name: str) -> Any:
        submodule = exports.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{submodule}"), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return list(exports), __getattr__, __dir__
