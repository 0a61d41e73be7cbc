"""The layer's structure (docs/DESIGN.md §11): plain imports, one name per module, the index in three
packages whose imports go one way, and import costs kept where they belong."""

from __future__ import annotations

import ast
import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "shared" / "agent_knowledge"
MODULES = sorted(LAYER.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_import_system_tricks_in_the_layer():
    found = []
    for path in MODULES:
        text = path.read_text(encoding="utf-8")
        for forbidden in ("sys.modules[", "__class__ =", "exec_module", "importlib.import_module"):
            if forbidden in text:
                found.append(f"{path.relative_to(ROOT)}: {forbidden}")
        for node in _tree(path).body:
            if isinstance(node, ast.FunctionDef) and node.name in {"__getattr__", "__dir__"}:
                found.append(f"{path.relative_to(ROOT)}: module-level {node.name}")
    assert found == []


def test_package_inits_import_nothing():
    for init in LAYER.rglob("__init__.py"):
        imports = [node for node in _tree(init).body if isinstance(node, ast.Import | ast.ImportFrom)]
        assert imports == [], init.relative_to(ROOT)


def test_every_module_basename_is_used_once():
    names = collections.Counter(path.stem for path in MODULES if path.name != "__init__.py")
    packages = {path.name for path in LAYER.rglob("*") if path.is_dir() and path.name != "__pycache__"}
    assert [name for name, count in names.items() if count > 1 or name in packages] == []


def test_at_most_twelve_root_modules():
    assert len([path for path in LAYER.glob("*.py") if path.name != "__init__.py"]) <= 12


# The index split by role (docs/DESIGN.md §11): the format both sides share, the indexer that
# writes generations, retrieval that reads them. Imports go one way: indexer → format ← retrieval.
INDEX_PACKAGES = ("index_format", "indexer", "retrieval")
FORBIDDEN_IMPORTS = {
    "index_format": ("indexer", "retrieval", "knowledge", "ingest"),
    "indexer": ("retrieval", "knowledge", "ingest"),
    "retrieval": ("indexer", "knowledge", "ingest"),
}


def _imported_modules(path: Path) -> list[str]:
    """Every module `path` imports, at any level (function-level lazy imports and TYPE_CHECKING
    blocks included), relative imports resolved; `from package import module` names the module."""
    package = ".".join(path.relative_to(LAYER.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.append(base)
            found.extend(f"{base}.{alias.name}" for alias in node.names)
    return found


def _layer_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "agent_knowledge" else None


def test_the_index_packages_import_one_way():
    wrong = []
    for package, forbidden in FORBIDDEN_IMPORTS.items():
        for path in (LAYER / package).rglob("*.py"):
            for module in _imported_modules(path):
                if _layer_package(module) in forbidden:
                    wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert wrong == []


def test_ingest_reads_the_index_format_only():
    # One publisher (docs/DESIGN.md §10): the ingestor stores documents and marks them pending; it
    # uses the index's format (chunk digests, versions, sizing), never the indexer or retrieval.
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in (LAYER / "ingest").rglob("*.py")
        for module in _imported_modules(path)
        if _layer_package(module) in ("indexer", "retrieval")
    ]
    assert wrong == []


def test_the_import_check_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    # The test above is only as good as _imported_modules: a function-level import and a relative
    # one must both be seen.
    package = tmp_path / "agent_knowledge" / "index_format"
    package.mkdir(parents=True)
    module = package / "probe.py"
    module.write_text("def later():\n    from ..indexer import writer\n    import agent_knowledge.retrieval.query\n")
    monkeypatch.setattr(sys.modules[__name__], "LAYER", tmp_path / "agent_knowledge")
    assert {"agent_knowledge.indexer.writer", "agent_knowledge.retrieval.query"} <= set(_imported_modules(module))


def test_the_index_packages_exist_and_index_is_gone():
    assert all((LAYER / package / "__init__.py").is_file() for package in INDEX_PACKAGES)
    assert list((LAYER / "index").glob("*.py")) == []  # a checkout may keep a stale __pycache__


def test_only_the_index_packages_open_tantivy():
    for path in MODULES:
        if path.relative_to(LAYER).parts[0] in INDEX_PACKAGES:
            continue
        for module in _imported_modules(path):
            assert module.split(".")[0] != "tantivy", path.relative_to(ROOT)


def test_the_local_runner_imports_no_testing_package():
    runner = ROOT / "local" / "agent_knowledge_dev"
    assert not (runner / "testing").exists()
    for path in runner.rglob("*.py"):
        for node in ast.walk(_tree(path)):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            assert not any(".testing" in module or module.startswith("tests") for module in modules), path


def _loaded_by_import(function: str, module: str) -> bool:
    """Whether importing the function's handler (a cold start's import phase) loads `module`."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(ROOT / 'functions' / function / 'app.py')!r})\n"
        "handler = importlib.util.module_from_spec(spec); spec.loader.exec_module(handler)\n"
        f"print({module!r} in sys.modules)\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "shared"), "AWS_DEFAULT_REGION": "us-east-1"}
    completed = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120, check=True
    )
    return completed.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize("function", ["capabilities", "complete_run", "ingest", "reconciler"])
def test_functions_that_never_search_do_not_load_tantivy(function):
    assert not _loaded_by_import(function, "tantivy")


@pytest.mark.parametrize("function", ["search", "turns", "mcp", "read", "capabilities"])
def test_the_protocol_functions_load_numpy_only_for_vectors(function):
    # retrieval/query_vector: numpy (~55 ms of a cold start) comes with retrieval/dense, imported when a KB
    # of the scope has vectors; a lexical-only stack never loads it.
    assert not _loaded_by_import(function, "numpy")
