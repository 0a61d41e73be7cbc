"""One publisher of index generations (docs/DESIGN.md §10, §11): the indexer. The ingestor stores
documents and marks them pending; it never imports the index's writing or publishing code, not
even lazily, and has no way to publish."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

from agent_knowledge.ingest.ingestor import Ingestor

ROOT = Path(__file__).resolve().parents[2]
INGEST = ROOT / "shared" / "agent_knowledge" / "ingest"
# The index's write side (the `indexer` package, and `builder`), by module name: whichever package
# these live in, the ingest package imports none of them.
WRITING_MODULES = {
    "builder",
    "compaction",
    "index_batch",
    "merge_policy",
    "publish",
    "rebuild",
    "segment_passes",
    "update",
    "vector_backlog",
    "vector_generation",
    "writer",
}
# What the ingest function's handler (functions/ingest/app.py) imports, and the ingestor.
INGEST_FUNCTION_MODULES = [
    "agent_knowledge.ingest.source_batch",
    "agent_knowledge.runtime.container",
    "agent_knowledge.core.observability",
    "agent_knowledge.dependencies",
    "agent_knowledge.ingest.ingestor",
]


def _imported_modules(path: Path) -> list[str]:
    """Every module `path` imports, at any depth of its code (lazy imports in functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return found


def test_no_ingest_module_imports_the_index_writing_code():
    found = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted(INGEST.glob("*.py"))
        for module in _imported_modules(path)
        if module.startswith("agent_knowledge.") and module.rsplit(".", 1)[-1] in WRITING_MODULES
    ]
    assert found == []


def test_the_ingest_function_loads_neither_the_writer_nor_tantivy():
    code = (
        f"import sys, {', '.join(INGEST_FUNCTION_MODULES)}\n"
        "print(sorted(m for m in sys.modules if m == 'tantivy' or "
        f"(m.startswith('agent_knowledge.') and m.rsplit('.', 1)[-1] in {sorted(WRITING_MODULES)!r})))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT / "shared")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout.strip() == "[]"


def test_the_ingestor_has_no_way_to_publish():
    assert not hasattr(Ingestor, "rebuild_index")
    for method in (Ingestor.put, Ingestor.delete):
        assert "rebuild_index" not in inspect.signature(method).parameters
