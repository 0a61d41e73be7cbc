"""The long fuzz and soak runs: the slow variants of the reliability tests (RUN_SLOW=1).

    python -m bench.reliability.fuzz            # token decoders + every endpoint, ~36,000 cases
    python -m bench.reliability.fuzz --soak     # also the long concurrency and hanging-storage runs

Prints pytest's summary, including "fuzz cases run: ..." and the leak check's line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench.reliability.client import ROOT

FUZZ = ["tests/reliability/test_token_fuzz.py", "tests/reliability/test_endpoint_fuzz.py"]
SOAK = ["tests/reliability/test_consistency.py", "tests/reliability/test_local_api.py"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soak", action="store_true", help="also run the long concurrency and fault runs")
    arguments = parser.parse_args(argv)
    paths = FUZZ + (SOAK if arguments.soak else [])
    environment = dict(os.environ, RUN_SLOW="1")
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-s", "-p", "no:randomly", *paths]
    return subprocess.run(command, cwd=ROOT, env=environment).returncode


if __name__ == "__main__":
    sys.exit(main())
