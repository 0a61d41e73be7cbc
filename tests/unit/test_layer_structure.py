"""The layer's structure (docs/DESIGN.md §11): plain imports, one name per module, the index in one
package, and import costs kept where they belong."""

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


def test_the_index_lives_in_one_package():
    # Nothing outside index/ opens tantivy; the write side and the read side share that package.
    for path in MODULES:
        if path.parent.name == "index":
            continue
        for node in ast.walk(_tree(path)):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(name.split(".")[0] == "tantivy" for name in names), path.relative_to(ROOT)


def test_the_index_never_imports_the_ingest_side():
    for path in (LAYER / "index").glob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("agent_knowledge.ingest"), path.relative_to(ROOT)


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
