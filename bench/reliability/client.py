"""Start the harness in a subprocess and talk to it over loopback HTTP: used by the reliability tests
and the benchmarks alike."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from tests.support.local_api import LocalApiClient, Reply

from agent_knowledge_dev.aws_environment import environment_without_aws

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 90
REQUEST_TIMEOUT = 60  # a fault drill waits out the functions' own timeouts

__all__ = ["ROOT", "LocalApi", "Reply"]


class LocalApi:
    """A harness subprocess; its stderr (the functions' logs) goes to `log_path`."""

    def __init__(self, log_path: Path) -> None:
        environment = environment_without_aws()
        environment["PYTHONUNBUFFERED"] = "1"
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.reliability.harness"],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.client = self._wait_ready()
        self.host, self.port, self.token = self.client.host, self.client.port, self.client.token

    def _wait_ready(self) -> LocalApiClient:
        assert self.process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT
        line = self.process.stdout.readline()
        if not line.startswith("ready ") or time.monotonic() > deadline:
            self.process.kill()
            raise RuntimeError(f"harness did not start: {line!r}\n{self.log_path.read_text(errors='replace')}")
        _, url, token = line.split()
        host, port = url.removeprefix("http://").rsplit(":", 1)
        return LocalApiClient(host, int(port), token)

    def command(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def capabilities(self) -> Reply:
        return self.client.capabilities(timeout=REQUEST_TIMEOUT)

    def search(self, query: str, limit: int = 3) -> Reply:
        return self.client.search({"query": query, "limit": limit}, timeout=REQUEST_TIMEOUT)

    def read(self, ref: str, cursor: str | None = None, max_bytes: int = 16384) -> Reply:
        body = {"ref": ref, "max_bytes": max_bytes} | ({"cursor": cursor} if cursor else {})
        return self.client.read(body, timeout=REQUEST_TIMEOUT)

    def close(self) -> int:
        try:
            if self.process.poll() is None:
                self.command("quit")
            return self.process.wait(timeout=30)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.process.kill()
            return self.process.wait()
        finally:
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()
            self._log.close()
