"""A real `agent-knowledge serve` in a subprocess, on a free loopback port (one per module keeps
the suite fast), through `agent_knowledge_dev.stacks.start_server`.

Reusable from any e2e test module: take the module-scoped `local_api` fixture. The server runs
with its own temporary state dir, so it neither sees nor blocks a `serve` a developer has running.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.local_api import ServedApi, start_server


@pytest.fixture(scope="module")
def local_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    yield from _served(tmp_path_factory)


@pytest.fixture(scope="module")
def lexical_local_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    """`serve --embedding-provider none`: for tests that never search by meaning, without the local
    model's start-up and indexing CPU."""
    yield from _served(tmp_path_factory, "--embedding-provider", "none")


def _served(tmp_path_factory: pytest.TempPathFactory, *options: str) -> Iterator[ServedApi]:
    directory = tmp_path_factory.mktemp("serve")
    api = start_server(directory / "state", directory / "serve.out", serve_options=options)
    try:
        yield api
    finally:
        status = api.stop()
    assert status == 0, api.output_text()
