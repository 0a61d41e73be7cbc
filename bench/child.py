"""A measuring child process: the parent runs `python -m MODULE ARGS` and reads the one line the
child prints as `BENCH_RESULT {json}`.

Imports only `json` at module level: cold_child.py imports this before its clock starts, and must
not warm anything the handler it measures would import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = "BENCH_RESULT "
ROOT = Path(__file__).resolve().parents[1]


def report(result: dict[str, Any]) -> None:
    """The child's side: print the result line."""
    print(MARKER + json.dumps(result), flush=True)


def run_child(module: str, arguments: list[str], environment: dict[str, str], timeout: float) -> dict[str, Any]:
    """The parent's side: run the child and return its result, or raise with the end of its stderr."""
    import subprocess
    import sys

    command = [sys.executable, "-m", module, *arguments]
    completed = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout)
    for line in completed.stdout.splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :])
    raise RuntimeError(f"{module} failed ({completed.returncode}): {completed.stderr[-2000:]}")
