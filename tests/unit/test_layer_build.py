"""The layer's build (shared/Makefile, run by `sam build`): arm64 wheels, compiled to bytecode once.

Lambda cannot write bytecode at run time, so a layer shipped without it compiles every module it
imports on every cold start; the cold-start benchmark measures the layer compiled the same way.
"""

from __future__ import annotations

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


ARTIFACTS = "/artifacts"
LAYER = f"{ARTIFACTS}/python"  # what Lambda puts on sys.path from a layer: /opt/python


def recipe() -> list[list[str]]:
    """The commands `sam build` would run (`make -n`), each split as the shell would."""
    completed = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT / "shared"), TARGET, f"ARTIFACTS_DIR={ARTIFACTS}"]
        + ["PYTHON=python3.12"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    joined = completed.stdout.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


def step(program: str, *arguments: str) -> list[str]:
    found = [command for command in recipe() if command[: 1 + len(arguments)] == [program, *arguments]]
    assert len(found) == 1, (program, arguments, recipe())
    return found[0]


def test_sam_builds_the_layer_with_the_makefile_for_arm64():
    layer = load_template()["Resources"]["AgentKnowledgeLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]


def test_the_layer_installs_the_requirements_as_aarch64_wheels_into_python():
    install = step("python3.12", "-m", "pip", "install")
    assert install[install.index("--target") + 1] == LAYER
    assert install[install.index("-r") + 1] == "requirements.txt"
    assert "--no-compile" in install and "--only-binary=:all:" in install
    assert install[install.index("--python-version") + 1] == "3.12"
    platforms = [install[i + 1] for i, option in enumerate(install) if option == "--platform"]
    assert all(platform.endswith("_aarch64") for platform in platforms)
    # pip does not expand manylinux_2_X to older glibc versions: 2.17 (manylinux2014) up to
    # Amazon Linux 2023's 2.34 are each listed.
    assert {
        "manylinux2014_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux_2_28_aarch64",
        "manylinux_2_34_aarch64",
    } <= set(platforms)
    # A reused artifacts directory starts empty: pip --target keeps what is already there.
    assert recipe().index(["rm", "-rf", LAYER]) < recipe().index(install)


def test_the_layer_is_compiled_as_the_benchmark_compiles_it():
    compile_step = step("python3.12", "-m", "compileall")
    assert compile_step[-1] == LAYER
    assert tuple(compile_step[1:-1]) == COMPILE_ARGUMENTS
    assert "unchecked-hash" in compile_step  # no timestamp check: a zip round trip changes mtimes
    # agent_knowledge is copied into python/ before the compilation, and no stale bytecode goes with it.
    commands = recipe()
    copy = step("cp", "-R", "agent_knowledge")
    assert copy[-1].rstrip("/") == LAYER
    prune = next(command for command in commands if command[0] == "find" and "__pycache__" in command)
    assert prune[1] == LAYER
    assert commands.index(copy) < commands.index(prune) < commands.index(compile_step)


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
