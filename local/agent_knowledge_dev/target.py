"""Which stack the admin commands talk to.

Default: the local stack of the running `agent-knowledge serve` (found through the state dir).
With `--aws`: real AWS through the normal boto3 configuration (AWS_PROFILE, AWS_REGION, SSO, …) and
the deployed stack's table and bucket names from the same environment variables the functions use
(SESSIONS_TABLE, CONFIG_TABLE, DOCUMENTS_TABLE, RUNS_TABLE, BODIES_BUCKET — the stack's outputs).
"""

from __future__ import annotations

import argparse
import functools
import os
from typing import Any

from agent_knowledge.repositories import Repositories
from agent_knowledge.settings import Settings
from agent_knowledge_dev.console import CliError

ADMIN_VARIABLES = ("SESSIONS_TABLE", "CONFIG_TABLE", "DOCUMENTS_TABLE", "RUNS_TABLE", "BODIES_BUCKET")


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--aws",
        action="store_true",
        help="act on a deployed stack through your AWS configuration; table and bucket names from "
        + ", ".join(ADMIN_VARIABLES),
    )


def connect(arguments: argparse.Namespace) -> Repositories:
    from agent_knowledge_dev.functions import function_logs_to_stderr

    repositories = _aws_repositories() if arguments.aws else _local_repositories()
    function_logs_to_stderr()  # the shared code logs with Powertools; stdout is for the JSON result
    return repositories


@functools.cache
def _client(service: str) -> Any:
    """The functions' clients give up after 4 s (a Lambda has 15 s in all). An operator's bulk job
    against a busy local moto or a throttled table can afford to wait and retry longer. The
    repositories build well-formed requests, so botocore's client-side parameter validation (about
    a millisecond per large document record) is skipped; the service still validates them. S3 puts
    go without `Expect: 100-continue`: document bodies are at most a few MB, and waiting for the
    interim answer costs a round trip per document in a bulk load."""
    import botocore.session
    from botocore.config import Config
    from botocore.handlers import add_expect_header

    config = Config(
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=5,
        read_timeout=120,
        max_pool_connections=32,
        parameter_validation=False,
    )
    client = botocore.session.get_session().create_client(service, config=config)
    if service == "s3":
        client.meta.events.unregister("before-call.s3", add_expect_header)
    return client


def _repositories(settings: Settings) -> Repositories:
    return Repositories.build(settings, _client("dynamodb"), s3=lambda: _client("s3"))


def _local_repositories() -> Repositories:
    from agent_knowledge.settings import get_settings
    from agent_knowledge_dev.localstate import running_server
    from agent_knowledge_dev.runtime import use_local_backend, use_stack_environment

    server = running_server()
    if server is None:
        raise CliError("no local stack: start one with `agent-knowledge serve` (or pass --aws for a deployed stack)")
    use_local_backend(server.moto_endpoint)
    use_stack_environment(server.environment)
    _client.cache_clear()
    return _repositories(get_settings())


def _aws_repositories() -> Repositories:
    missing = [name for name in ADMIN_VARIABLES if not os.environ.get(name)]
    if missing:
        raise CliError(f"--aws needs the stack's names in {', '.join(missing)} (see the README, 'Deploy')")
    settings = Settings(
        sessions_table=os.environ["SESSIONS_TABLE"],
        config_table=os.environ["CONFIG_TABLE"],
        documents_table=os.environ["DOCUMENTS_TABLE"],
        runs_table=os.environ["RUNS_TABLE"],
        bodies_bucket=os.environ["BODIES_BUCKET"],
        # The admin commands never sign references, so they do not need the server token.
        server_token_secret_id=os.environ.get("SERVER_TOKEN_SECRET_ID") or "not-used-by-admin-commands",
    )
    _client.cache_clear()
    return _repositories(settings)
