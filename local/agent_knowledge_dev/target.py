"""Which stack the admin commands talk to.

Default: the local stack of the running `agent-knowledge serve` (found through the state dir).
With `--aws --stack NAME`: a deployed stack, through the normal AWS configuration (AWS_PROFILE,
SSO, instance roles, …; `AWS_REGION` wins over the profile's region), with the table and bucket
names read from the stack's CloudFormation outputs (`describe_stacks`; no `aws` CLI needed).
Missing credentials or region are said as such before anything else is tried.
"""

from __future__ import annotations

import argparse
import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_knowledge_dev.console import CliError

if TYPE_CHECKING:  # imported where used: every CLI run imports this module, few commands connect
    from agent_knowledge.repositories.bundle import Repositories
    from agent_knowledge.settings import Settings

# Settings field → the stack output holding its value (template.yaml, Outputs).
STACK_OUTPUTS = {
    "sessions_table": "SessionsTableName",
    "config_table": "ConfigTableName",
    "documents_table": "DocumentsTableName",
    "runs_table": "RunsTableName",
    "bodies_bucket": "BodiesBucketName",
}
SOURCES_BUCKET_OUTPUT = "SourcesBucketName"
SOURCES_BUCKET_VARIABLE = "SOURCES_BUCKET"
# The pipeline's queues (template logical id → the stack output holding its URL): `kb sync` sends
# to the source and index queues, `kb status` and `doc list` count the dead-letter queues.
QUEUE_OUTPUTS = {
    "SourceQueue": "SourceQueueUrl",
    "SourceDeadLetterQueue": "SourceDeadLetterQueueUrl",
    "IndexQueue": "IndexQueueUrl",
    "IndexDeadLetterQueue": "IndexDeadLetterQueueUrl",
}


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--aws",
        action="store_true",
        help="act on a deployed stack (with --stack) through your AWS configuration instead of the local serve",
    )
    parser.add_argument(
        "--stack", metavar="NAME", help="with --aws: the CloudFormation stack whose outputs name the tables and buckets"
    )


@dataclass(frozen=True)
class StackNames:
    settings: Settings
    sources_bucket: str | None  # None: a stack deployed before the sources bucket existed
    # Queue URLs by logical id, from the stack's outputs (a deployed stack; those it has).
    queues: dict[str, str] = field(default_factory=dict)


# The local `serve` this process connected to (None: none yet, or a deployed stack).
_connected_serve: dict[str, Any] = {}


def forget_connected_serve() -> None:
    """A new command starts connected to nothing: `local_stack_stopped` speaks of the `serve` this
    command connected to, never of one an earlier command in the same process used."""
    _connected_serve.clear()


def local_stack_stopped() -> bool:
    """Whether the local `serve` this command connected to has stopped: no `serve` holds the lock,
    another one does (a restart: a new, empty stack), or its moto server refuses connections (it
    stops before the lock is released). False when the command acts on a deployed stack. Asked
    after a storage call failed, to tell "the stack is gone" from "a call failed"."""
    import socket
    from urllib.parse import urlsplit

    from agent_knowledge_dev.localstate import running_server

    endpoint = _connected_serve.get("moto_endpoint")
    if endpoint is None:
        return False
    server = running_server()
    if server is None or server.moto_endpoint != endpoint:
        return True
    address = urlsplit(endpoint)
    try:
        socket.create_connection((address.hostname, address.port), timeout=2).close()
    except OSError:
        return True
    return False


def connect(arguments: argparse.Namespace) -> Repositories:
    from agent_knowledge.repositories.bundle import Repositories
    from agent_knowledge_dev.console import function_logs_to_stderr

    names = _names(arguments)
    _client.cache_clear()
    repositories = Repositories.build(names.settings, _client("dynamodb"), s3=lambda: _client("s3"))
    function_logs_to_stderr()  # the shared code logs with Powertools; stdout is for the JSON result
    return repositories


def sources_bucket(arguments: argparse.Namespace) -> tuple[Any, str] | None:
    """The S3 client and the name of the sources bucket (call after `connect`); None for a stack
    deployed before the sources bucket existed."""
    names = _names(arguments)
    return None if names.sources_bucket is None else (_client("s3"), names.sources_bucket)


def pipeline_queues(arguments: argparse.Namespace) -> tuple[Any, dict[str, str]]:
    """The SQS client and the URLs of the stack's pipeline queues by logical id (call after
    `connect`); empty for a stack deployed before the pipeline."""
    names = _names(arguments)
    return _client("sqs"), (names.queues if arguments.aws else _local_queues())


def _local_queues() -> dict[str, str]:
    """The local stack's queues, by the names `stack.create_stack` gave them."""
    from botocore.exceptions import ClientError

    from agent_knowledge_dev.stack import queue_name
    from agent_knowledge_dev.template import resources_of_type

    sqs, found = _client("sqs"), {}
    for logical_id, resource in resources_of_type("AWS::SQS::Queue").items():
        if logical_id not in QUEUE_OUTPUTS:
            continue
        try:
            found[logical_id] = sqs.get_queue_url(QueueName=queue_name(logical_id, resource["Properties"]))["QueueUrl"]
        except ClientError:
            continue
    return found


def _names(arguments: argparse.Namespace) -> StackNames:
    if not arguments.aws:
        if arguments.stack:
            raise CliError("--stack names a deployed stack: add --aws (without it the commands act on the local serve)")
        return _local_names()
    if not arguments.stack:
        raise CliError("--aws needs --stack NAME (the stack you deployed with `sam deploy`)")
    _connected_serve.clear()
    return _stack_names(arguments.stack, _aws_region())


@functools.cache
def _client(service: str) -> Any:
    """The functions' clients give up after 4 s (a Lambda has 15 s in all). An operator's bulk job
    against a busy local moto or a throttled table can afford to wait and retry longer. The
    repositories build well-formed requests, so botocore's client-side parameter validation (about
    a millisecond per large document record) is skipped; the service still validates them. S3 puts
    go without `Expect: 100-continue`: document bodies are at most a few MB, and waiting for the
    interim answer costs a round trip per document in a bulk load."""
    from botocore.config import Config
    from botocore.handlers import add_expect_header

    config = Config(
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=5,
        read_timeout=120,
        max_pool_connections=32,
        parameter_validation=False,
    )
    client = _session().create_client(service, region_name=os.environ.get("AWS_REGION") or None, config=config)
    if service == "s3":
        client.meta.events.unregister("before-call.s3", add_expect_header)
    return client


def _session() -> Any:
    import botocore.session

    return botocore.session.get_session()


def _local_names() -> StackNames:
    from agent_knowledge.settings import get_settings
    from agent_knowledge_dev.localstate import running_server
    from agent_knowledge_dev.runtime import use_local_backend, use_stack_environment

    server = running_server()
    if server is None:
        raise CliError("no local stack: start one with `agent-knowledge serve` (or pass --aws --stack NAME)")
    use_local_backend(server.moto_endpoint)
    use_stack_environment(server.environment)
    _connected_serve["moto_endpoint"] = server.moto_endpoint
    return StackNames(get_settings(), server.environment.get(SOURCES_BUCKET_VARIABLE))


def _aws_region() -> str:
    """`AWS_REGION` (what Lambda and most SDKs read; botocore itself does not), else the profile's."""
    from botocore.exceptions import BotoCoreError

    session = _session()
    try:
        region = os.environ.get("AWS_REGION") or session.get_config_variable("region")
        credentials = session.get_credentials()
        if credentials is not None:
            credentials.get_frozen_credentials()  # an expired SSO login fails here, not mid-command
    except BotoCoreError as exc:
        raise CliError(f"no usable AWS credentials: {exc}") from None
    if credentials is None:
        raise CliError(
            "no AWS credentials found: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), "
            "run `aws sso login`, or run where an instance or task role is available"
        )
    if not region:
        raise CliError("no AWS region: set AWS_REGION (or a region in your AWS profile)")
    return str(region)


@functools.cache
def _stack_names(stack: str, region: str) -> StackNames:
    from botocore.exceptions import ClientError

    os.environ["AWS_REGION"] = region  # the repositories' clients use the same region
    cloudformation = _client("cloudformation")
    try:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", "")
        if "does not exist" in message:
            raise CliError(f"no stack {stack!r} in {region} (check --stack and AWS_REGION)") from None
        raise
    outputs = {output["OutputKey"]: output["OutputValue"] for output in described.get("Outputs", [])}
    missing = [name for name in STACK_OUTPUTS.values() if not outputs.get(name)]
    if missing:
        raise CliError(f"stack {stack!r} lacks the outputs {', '.join(missing)}: is it an agent-knowledge stack?")
    from agent_knowledge.settings import Settings

    settings = Settings(
        **{field: outputs[output] for field, output in STACK_OUTPUTS.items()},
        # The admin commands never sign references, so they do not need the server token.
        server_token_secret_id="not-used-by-admin-commands",
    )
    queues = {logical_id: outputs[output] for logical_id, output in QUEUE_OUTPUTS.items() if outputs.get(output)}
    return StackNames(settings, outputs.get(SOURCES_BUCKET_OUTPUT), queues)


# The template parameters (template.yaml) that choose the functions' embedding provider → the
# environment variables the functions read them from (`settings.EmbeddingSettings`).
EMBEDDING_PARAMETERS = {
    "EmbeddingProvider": "EMBEDDING_PROVIDER",
    "EmbeddingModelId": "EMBEDDING_MODEL_ID",
    "EmbeddingDimensions": "EMBEDDING_DIMENSIONS",
}


def stack_embedding_settings(stack: str) -> Any:
    """The deployed stack's embedding settings, from its parameters (call after `connect`): what
    its search functions embed queries with."""
    from agent_knowledge.settings import embedding_settings

    described = _client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    parameters = {entry["ParameterKey"]: entry.get("ParameterValue", "") for entry in described.get("Parameters", [])}
    return embedding_settings(
        {variable: parameters[name] for name, variable in EMBEDDING_PARAMETERS.items() if name in parameters}
    )
