"""The Lambda layer as `sam build` deploys it, for this machine's interpreter, to measure cold starts on.

The deployed layer (`/opt/python`) holds `agent_knowledge` and every distribution
`shared/requirements.txt` pulls in, dependencies included (Powertools' tracer extra brings
aws-xray-sdk, which brings botocore: the layer's botocore shadows the runtime's). Lambda's file system
is read-only, so Python can never cache bytecode there: a module shipped without its `.pyc` is
compiled from source on every cold start. The image copies the same distributions out of this
virtual environment (their installed files, as each distribution's RECORD lists them, minus bytecode),
so it needs no network and matches the interpreter that runs the benchmark:

- `bytecode=False`: the layer as SAM's own python builder ships it (wheels unpacked, no `.pyc`);
- `bytecode=True`: the layer as `shared/Makefile` ships it, compiled with `COMPILE_ARGUMENTS`.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "shared" / "requirements.txt"
# What shared/Makefile runs on the built layer (tests/unit/test_layer_build.py keeps them the same).
COMPILE_ARGUMENTS = ("-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash")


def _top_requirements() -> list[Requirement]:
    lines = REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    return [Requirement(line.strip()) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def distributions() -> list[importlib.metadata.Distribution]:
    """Every installed distribution the layer's requirements pull in, extras and markers applied."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    visited: set[tuple[str, frozenset[str]]] = set()  # a distribution reached again with other extras is expanded again
    pending = [(requirement, frozenset(requirement.extras)) for requirement in _top_requirements()]
    while pending:
        requirement, extras = pending.pop()
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if (key, extras) in visited:
            continue
        visited.add((key, extras))
        dist = seen.get(key) or importlib.metadata.distribution(requirement.name)
        seen[key] = dist
        for line in dist.requires or []:
            dependency = Requirement(line)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if dependency.marker is None or any(dependency.marker.evaluate(env) for env in environments):
                pending.append((dependency, frozenset(dependency.extras)))
    return sorted(seen.values(), key=lambda dist: dist.metadata["Name"].lower())


def build(target: Path, bytecode: bool) -> Path:
    """Create the layer's `python/` directory under `target` and return it."""
    python = target / "python"
    python.mkdir(parents=True)
    for dist in distributions():
        if dist.files is None:
            raise RuntimeError(f"{dist.metadata['Name']} lists no installed files (no RECORD): cannot copy it")
        for file in dist.files:
            parts = Path(file).parts
            if parts[0] == ".." or "__pycache__" in parts or file.suffix == ".pyc":
                continue  # console scripts outside site-packages; bytecode
            source = Path(dist.locate_file(file))
            if not source.is_file():
                raise RuntimeError(f"{dist.metadata['Name']}: {file} is listed in its RECORD but missing")
            destination = python / file
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
    shutil.copytree(
        ROOT / "shared" / "agent_knowledge", python / "agent_knowledge", ignore=shutil.ignore_patterns("__pycache__")
    )
    if bytecode:
        subprocess.run([sys.executable, *COMPILE_ARGUMENTS, str(python)], check=True, timeout=600)
    return python
