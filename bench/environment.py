"""The process environment of a benchmark and the in-process moto stack it runs against.

Both come from `agent_knowledge_dev.stacks`, as the test suite's do; what is the benchmarks' own
is their Powertools names, warnings-only logs and a fixed server token.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_knowledge_dev.aws_environment import dummy_environment, use_dummy_environment
from agent_knowledge_dev.stacks import in_process_stack

# The handlers create the X-Ray Tracer on their first invocation; the suite measures with
# tracing off (as every dummy environment has it) unless a figure says otherwise (cold start
# reports one traced run too).
BASE_ENVIRONMENT = dummy_environment("agent-knowledge-bench", "AgentKnowledgeBench", POWERTOOLS_LOG_LEVEL="WARNING")
# A fixed server token, so that a child process restoring a dumped stack verifies references
# the parent issued.
SERVER_TOKEN = "bench-server-token-0123456789abcdef0123456789abcdef"


def process_search() -> dict[str, Any]:
    """`retrieve`'s `embedder` and `reranker` as a search function of this process's environment
    has them (`Dependencies.embedder`, `Dependencies.reranker`): the benchmarks time the product's
    path. Made once per measurement, outside the timed calls."""
    from agent_knowledge.embedding.factory import make_embedder
    from agent_knowledge.retrieval.rerank import make_reranker
    from agent_knowledge.settings import embedding_settings, rerank_settings

    return {"embedder": make_embedder(embedding_settings()), "reranker": make_reranker(rerank_settings())}


def configure(extra: dict[str, str] | None = None) -> None:
    use_dummy_environment({**BASE_ENVIRONMENT, **(extra or {})})


@contextlib.contextmanager
def local_stack() -> Iterator[Any]:
    """An in-process moto stack from template.yaml; yields the layer's `Repositories` wired to it.

    Expects the dummy environment of `configure()` (or the test suite's) in place."""
    with in_process_stack(server_token=SERVER_TOKEN) as stack:
        yield stack.repositories


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Powertools writes metrics (EMF) and logs to stdout on every request; keep them off the terminal."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield


def wait_until_listening(port: int, process: subprocess.Popen[Any], timeout: float = 60) -> None:
    """Return once `process` (a moto server just started) accepts connections on `port`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.2)


# A moto server with the local runner's patches installed (`create_stack` installs them for `serve`).
_PATCHED_MOTO_SERVER = (
    "import sys\n"
    "from agent_knowledge_dev import moto_dynamodb, moto_s3, moto_sqs\n"
    "for patches in (moto_dynamodb, moto_s3, moto_sqs):\n"
    "    patches.install()\n"
    "from moto.server import main\n"
    "main(sys.argv[1:])\n"
)


@contextlib.contextmanager
def moto_server(local_patches: bool = False) -> Iterator[str]:
    """A moto server in a process of its own on a free loopback port (a cold container's bucket is
    another process's, as S3 is); yields its endpoint URL, stops it after. `local_patches`: with
    the local runner's moto patches, i.e. the moto `serve` runs (`agent_knowledge_dev/moto_*.py`)."""
    from tests.support.local_api import free_port

    port = free_port()
    start = ["-c", _PATCHED_MOTO_SERVER] if local_patches else ["-m", "moto.server"]
    server = subprocess.Popen(
        [sys.executable, *start, "-p", str(port)],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until_listening(port, server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
