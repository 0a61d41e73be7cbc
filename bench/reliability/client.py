"""Start the harness in a subprocess and talk to it over loopback HTTP: used by the reliability tests
and the benchmarks alike."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = "/agent-api/v1/workspaces/demo/knowledge"
READY_TIMEOUT = 90


@dataclass
class Reply:
    status: int
    body: bytes
    seconds: float
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


class LocalApi:
    """A harness subprocess; its stderr (the functions' logs) goes to `log_path`."""

    def __init__(self, log_path: Path) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
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
        self.host, self.port, self.token = self._wait_ready()

    def _wait_ready(self) -> tuple[str, int, str]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT
        line = self.process.stdout.readline()
        if not line.startswith("ready ") or time.monotonic() > deadline:
            self.process.kill()
            raise RuntimeError(f"harness did not start: {line!r}\n{self.log_path.read_text(errors='replace')}")
        _, url, token = line.split()
        host, port = url.removeprefix("http://").rsplit(":", 1)
        return host, int(port), token

    def command(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def request(self, method: str, endpoint: str, body: Any = None, timeout: float = 60) -> Reply:
        headers = {"Authorization": f"Bearer {self.token}"}
        payload = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        started = time.perf_counter()
        try:
            connection.request(method, f"{WORKSPACE}/{endpoint}", body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
            headers_out = {k.lower(): v for k, v in response.getheaders()}
            return Reply(response.status, data, time.perf_counter() - started, headers_out)
        finally:
            connection.close()

    def capabilities(self) -> Reply:
        return self.request("GET", "capabilities")

    def search(self, query: str, limit: int = 3) -> Reply:
        return self.request("POST", "search", {"query": query, "limit": limit})

    def read(self, ref: str, cursor: str | None = None, max_bytes: int = 16384) -> Reply:
        body = {"ref": ref, "max_bytes": max_bytes} | ({"cursor": cursor} if cursor else {})
        return self.request("POST", "read", body)

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
