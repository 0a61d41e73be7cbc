"""The layer's build (shared/Makefile, run by `sam build`): arm64 wheels, compiled to bytecode once.

Lambda cannot write bytecode at run time, so a layer shipped without it compiles every module it
imports on every cold start; the cold-start benchmark measures the layer compiled the same way.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from bench.layer_image import COMPILE_ARGUMENTS

from agent_knowledge_dev.template import load_template

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "shared" / "Makefile"
TARGET = "build-AgentKnowledgeLayer"


def recipe() -> list[str]:
    lines = MAKEFILE.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"{TARGET}:")
    body: list[str] = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        body.append(line.strip())
    return body


def test_sam_builds_the_layer_with_the_makefile_for_arm64():
    layer = load_template()["Resources"]["AgentKnowledgeLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]


def test_the_layer_installs_the_requirements_as_aarch64_wheels_without_compiling_them_for_the_build_python():
    install = next(line for line in recipe() if " pip install " in line)
    assert "-r requirements.txt" in install and "--no-compile" in install and "$(WHEELS)" in install
    wheels = re.search(r"^WHEELS := (.*?)(?<!\\)$", MAKEFILE.read_text(encoding="utf-8"), re.M | re.S)
    assert wheels
    options = shlex.split(wheels.group(1).replace("\\\n", " "))
    assert "--only-binary=:all:" in options
    assert options[options.index("--python-version") + 1] == "3.12"
    platforms = [options[i + 1] for i, option in enumerate(options) if option == "--platform"]
    assert platforms and all(platform.endswith("_aarch64") for platform in platforms)


def test_the_layer_is_compiled_as_the_benchmark_compiles_it():
    compile_line = next(line for line in recipe() if "compileall" in line)
    assert compile_line.startswith("$(PYTHON) ")
    arguments = shlex.split(compile_line)[1:-1]  # between the interpreter and the layer directory
    assert tuple(arguments) == COMPILE_ARGUMENTS
    assert "unchecked-hash" in arguments  # no timestamp check: a zip round trip changes mtimes
    # agent_knowledge is copied in before the compilation, and no stale bytecode goes with it.
    steps = recipe()
    copy = next(i for i, line in enumerate(steps) if line.startswith("cp -R agent_knowledge"))
    prune = next(i for i, line in enumerate(steps) if "__pycache__" in line)
    assert copy < prune < steps.index(compile_line)


def _make(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    assignments = [f"{name}={value}" for name, value in variables.items()]
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT / "shared"), TARGET, *assignments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )


def test_the_build_refuses_to_run_outside_sam(tmp_path):
    completed = _make(tmp_path, PYTHON=sys.executable, ARTIFACTS_DIR="")
    assert completed.returncode != 0
    assert "ARTIFACTS_DIR is not set" in completed.stderr


@pytest.mark.skipif(sys.version_info[:2] == (3, 12), reason="this interpreter is the one the build wants")
def test_the_build_refuses_a_python_other_than_the_runtimes(tmp_path):
    artifacts = tmp_path / "artifacts"
    completed = _make(tmp_path, PYTHON=sys.executable, ARTIFACTS_DIR=str(artifacts))
    assert completed.returncode != 0
    assert "compiled for the python3.12 runtime" in completed.stderr
    assert not artifacts.exists()  # nothing half built
