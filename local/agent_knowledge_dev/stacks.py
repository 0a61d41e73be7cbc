"""The template's stack on moto: in-process (`mock_aws`) for tests and benchmarks, or on a moto
server on loopback for `serve`, `invoke` against it, and the fault-drill harness.

Both build tables, bucket and secret from template.yaml (`agent_knowledge_dev.stack`) and reset
every per-container cache of the layer around them: a new stack's KB generations begin again at 0,
and nothing the previous one cached may be seen.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_knowledge_dev.runtime import reset_caches

if TYPE_CHECKING:
    from agent_knowledge.repositories.bundle import Repositories


@dataclass(frozen=True)
class InProcessStack:
    environment: dict[str, str]
    repositories: Repositories


@contextmanager
def in_process_stack(server_token: str | None = None) -> Iterator[InProcessStack]:
    """An in-process moto stack; this process's environment points at it until the block ends.

    Expects the dummy AWS environment (`use_dummy_environment`) to be in place already."""
    from moto import mock_aws

    from agent_knowledge.repositories import aws
    from agent_knowledge.repositories.bundle import Repositories
    from agent_knowledge.settings import get_settings
    from agent_knowledge_dev.stack import create_stack

    with mock_aws():
        reset_caches()
        environment = create_stack(aws.client, server_token=server_token)
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        reset_caches()
        try:
            repositories = Repositories.build(
                get_settings(), aws.client("dynamodb"), s3=functools.partial(aws.client, "s3")
            )
            yield InProcessStack(environment, repositories)
        finally:
            reset_caches()
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@dataclass
class MotoServerStack:
    moto: Any  # moto.server.ThreadedMotoServer
    endpoint: str
    environment: dict[str, str]
    documents: int  # sample documents seeded

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def stop_moto(self) -> None:
        """Storage goes away: connections to it are refused from now on (idempotent)."""
        if self.moto is not None:
            self.moto.stop()
            self.moto = None


@contextmanager
def moto_server_stack(
    seed: bool = True,
    pipeline: bool = True,
    *,
    in_process: bool = False,
    embedding_provider: str = "local",
    mcp_allowed_origins: str = "",
    environment: dict[str, str] | None = None,
) -> Iterator[MotoServerStack]:
    """A moto server on loopback with the template's stack (and the demo workspace and sample
    documents when `seed`); this process is pointed at it for good (run it in its own process).
    With `pipeline`, objects put in the sources bucket are ingested and indexed as on AWS
    (`agent_knowledge_dev.event_sources`: S3 events and event source mappings, in this process),
    and the reconciler runs on its schedule (`agent_knowledge_dev.reconcile_schedule`).

    With `in_process` (`serve`), the functions of this process reach the same moto backends
    through moto's in-process mock instead of HTTP on loopback: the moto server stays for the
    other processes (admin commands, `invoke`, `aws --endpoint-url`), and the functions' calls skip
    the HTTP client, a TCP connection, werkzeug and Flask — about half of what each call cost, and
    each document is a dozen calls. The fault drills keep HTTP (`stop_moto` cuts storage off).
    `embedding_provider`: the stack's EmbeddingProvider (`stack.LOCAL_EMBEDDING_PROVIDERS`);
    `mcp_allowed_origins`: its McpAllowedOrigins (`serve`: its loopback origins); `environment`:
    variables set over the template's (`serve --oauth`: its test issuer's OAUTH_*)."""
    from moto import mock_aws
    from moto.server import ThreadedMotoServer

    from agent_knowledge.repositories import aws
    from agent_knowledge.runtime.container import default_repositories
    from agent_knowledge_dev.demo import seed_demo, seed_sample_documents
    from agent_knowledge_dev.functions import function_logs_to_stderr
    from agent_knowledge_dev.runtime import use_local_backend, use_stack_environment
    from agent_knowledge_dev.stack import create_stack

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    mock = None
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    stack = MotoServerStack(moto, f"http://{host}:{port}", {}, 0)
    try:
        use_local_backend(stack.endpoint)
        stack.environment = create_stack(aws.client, embedding_provider=embedding_provider)
        # The MCP function's own variable (template parameter McpAllowedOrigins; agent_knowledge.mcp.origins,
        # not imported here: the layer's observability must first see the environment): locally
        # every function shares one environment.
        stack.environment["MCP_ALLOWED_ORIGINS"] = mcp_allowed_origins
        stack.environment.update(environment or {})
        use_stack_environment(stack.environment)
        if in_process:
            mock = mock_aws()
            mock.start(reset=False)  # the backends the server already holds
            os.environ.pop("AWS_ENDPOINT_URL", None)  # clients address AWS itself, which the mock answers
            reset_caches()
        function_logs_to_stderr()  # after the environment: Powertools names its logger from it
        if seed:
            seed_demo(default_repositories())
            stack.documents = seed_sample_documents(default_repositories())
        runner = schedule = None
        if pipeline:
            from agent_knowledge_dev.event_sources import start_local_pipeline
            from agent_knowledge_dev.reconcile_schedule import ReconcileSchedule

            runner = start_local_pipeline()
            # The reconciler's EventBridge schedule (template.yaml ReconcileSchedule).
            schedule = ReconcileSchedule().start()
        try:
            yield stack
        finally:
            if schedule is not None:
                schedule.stop()
            if runner is not None:
                runner.stop()
    finally:
        if mock is not None:
            mock.stop(remove_data=False)
        stack.stop_moto()
