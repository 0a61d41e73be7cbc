"""Create the template's tables, bucket and secret in a moto backend, and the matching environment.

Works against in-process moto (`mock_aws`) in tests and against a moto server (`AWS_ENDPOINT_URL`)
for `agent-knowledge serve`. Physical names are derived from logical ids, so they are stable.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from agent_knowledge_dev.template import environment_variables, resources_of_type, template

SERVER_TOKEN_SECRET_NAME = "agent-knowledge/server-token"
# The template's defaults of the ephemeral storage sizes: what `kb status` reports the largest
# servable index from (agent_knowledge.index_format.sizing).
LOCAL_PARAMETERS = {
    "RunTtlSeconds": "86400",
    "SearchEphemeralStorageSize": "2048",
    "IndexerEphemeralStorageSize": "2048",
    # Hybrid search out of the box, offline: the local model (weights inside a registry package)
    # stands in for Bedrock, which moto does not serve. Its model id and dimensions are its own.
    "EmbeddingProvider": "local",
    "EmbeddingModelId": "",
    "EmbeddingDimensions": "",
    # Bearer-token mode (the template's defaults); `serve --oauth` sets the issuer and audience of
    # its local test issuer (agent_knowledge_dev/oauth_issuer.py).
    "OAuthIssuer": "",
    "OAuthAudience": "",
    "OAuthRolesClaim": "roles",
    "OAuthTenantClaim": "tenant",
    "OAuthClientIdClaim": "",
    "OAuthScopes": "",
}
# What `serve --embedding-provider` may choose: moto serves no Bedrock, so the alternatives to the
# local model are `local-e5` (multilingual-e5-small, the `e5` extra: embedding/e5.py) and `none`
# (lexical only, e.g. to measure the lexical pipeline alone).
LOCAL_EMBEDDING_PROVIDERS = ("local", "local-e5", "none")


def table_name(logical_id: str) -> str:
    return logical_id


def bucket_name(logical_id: str) -> str:
    return f"agent-knowledge-{logical_id.lower()}"


# Where operators upload documents locally: s3://agent-knowledge-sourcesbucket/<kb_id>/<source_key>.
SOURCES_BUCKET = bucket_name("SourcesBucket")


def _create_table(dynamodb: Any, logical_id: str, properties: dict[str, Any]) -> None:
    request: dict[str, Any] = {
        "TableName": table_name(logical_id),
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "KeySchema": properties["KeySchema"],
        "BillingMode": properties.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if properties.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = properties["GlobalSecondaryIndexes"]
    dynamodb.create_table(**request)
    ttl = properties.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(
            TableName=table_name(logical_id),
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )


def queue_name(logical_id: str, properties: dict[str, Any]) -> str:
    return f"{logical_id}.fifo" if properties.get("FifoQueue") else logical_id


def _queue_arn(value: Any, arns: dict[str, str]) -> str:
    """`!GetAtt Queue.Arn` → the local queue's ARN."""
    logical_id, attribute = value["Fn::GetAtt"]
    if attribute != "Arn" or logical_id not in arns:
        raise ValueError(f"cannot resolve !GetAtt {logical_id}.{attribute} locally")
    return arns[logical_id]


def _create_queues(sqs: Any) -> dict[str, tuple[str, str]]:
    """The template's SQS queues (dead-letter queues first); logical id → (url, arn)."""
    queues = resources_of_type("AWS::SQS::Queue")
    order = sorted(queues, key=lambda name: "RedrivePolicy" in queues[name]["Properties"])
    created: dict[str, tuple[str, str]] = {}
    for logical_id in order:
        properties = queues[logical_id]["Properties"]
        attributes = {
            name: str(properties[name]).lower() if isinstance(properties[name], bool) else str(properties[name])
            for name in ("VisibilityTimeout", "MessageRetentionPeriod", "FifoQueue", "ContentBasedDeduplication")
            if name in properties
        }
        redrive = properties.get("RedrivePolicy")
        if redrive:
            target = _queue_arn(redrive["deadLetterTargetArn"], {k: v[1] for k, v in created.items()})
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": target, "maxReceiveCount": int(redrive["maxReceiveCount"])}
            )
        url = sqs.create_queue(QueueName=queue_name(logical_id, properties), Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        created[logical_id] = (url, arn)
    return created


def _notifications(properties: dict[str, Any], queues: dict[str, tuple[str, str]]) -> dict[str, Any] | None:
    """The bucket's `NotificationConfiguration` with its queue ARNs resolved locally."""
    configuration = properties.get("NotificationConfiguration")
    if not configuration:
        return None
    arns = {logical_id: arn for logical_id, (_, arn) in queues.items()}
    return {
        "QueueConfigurations": [
            {"Events": [queue["Event"]], "QueueArn": _queue_arn(queue["Queue"], arns)}
            for queue in configuration.get("QueueConfigurations", [])
        ]
    }


def create_stack(
    client: Callable[[str], Any], server_token: str | None = None, embedding_provider: str = "local"
) -> dict[str, str]:
    """Create what is missing; return the environment the functions run with.

    `client(service)` returns a boto3 client pointed at the moto backend; `embedding_provider` is
    one of `LOCAL_EMBEDDING_PROVIDERS` (the template's EmbeddingProvider parameter).
    """
    if embedding_provider not in LOCAL_EMBEDDING_PROVIDERS:
        raise ValueError(
            f"embedding provider {embedding_provider!r} cannot run locally; choose one of {LOCAL_EMBEDDING_PROVIDERS}"
        )
    from agent_knowledge_dev import moto_dynamodb, moto_s3, moto_sqs

    # For a moto backend in this process (tests, `serve`): safe for concurrent requests, and no
    # work per request that grows with the queue, the table or the bucket.
    moto_dynamodb.install()
    moto_sqs.install()
    moto_s3.install()
    dynamodb = client("dynamodb")
    s3 = client("s3")
    secretsmanager = client("secretsmanager")
    queues = _create_queues(client("sqs"))  # create_queue returns the existing queue if there is one

    existing_tables = set(dynamodb.list_tables().get("TableNames", []))
    for logical_id, resource in resources_of_type("AWS::DynamoDB::Table").items():
        if table_name(logical_id) not in existing_tables:
            _create_table(dynamodb, logical_id, resource["Properties"])

    existing_buckets = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    for logical_id, resource in resources_of_type("AWS::S3::Bucket").items():
        name = bucket_name(logical_id)
        if name not in existing_buckets:
            s3.create_bucket(Bucket=name)
            versioning = resource["Properties"].get("VersioningConfiguration")
            if versioning:
                s3.put_bucket_versioning(Bucket=name, VersioningConfiguration=versioning)
            notifications = _notifications(resource["Properties"], queues)
            if notifications:
                s3.put_bucket_notification_configuration(Bucket=name, NotificationConfiguration=notifications)

    try:
        secret_arn = secretsmanager.describe_secret(SecretId=SERVER_TOKEN_SECRET_NAME)["ARN"]
    except secretsmanager.exceptions.ResourceNotFoundException:
        secret_arn = secretsmanager.create_secret(
            Name=SERVER_TOKEN_SECRET_NAME, SecretString=server_token or secrets.token_urlsafe(48)
        )["ARN"]

    queue_urls = {logical_id: url for logical_id, (url, _) in queues.items()}
    parameters = {**LOCAL_PARAMETERS, "EmbeddingProvider": embedding_provider}
    environment = resolve_environment({"ServerTokenSecretArn": secret_arn, **parameters, **queue_urls})
    # Reranking (template parameter RerankModelId) calls Bedrock, which moto does not serve: always
    # off locally, whatever the shell that started `serve` has set.
    return {**environment, "RERANK_MODEL_ID": ""}


# Conditions of the template that never hold on the local stack (it has no SnapStart).
LOCAL_FALSE_CONDITIONS = frozenset({"UsesSnapStart"})


def resolve_environment(parameters: dict[str, str]) -> dict[str, str]:
    """The template's Globals environment with every `Ref` resolved to a local name or parameter
    (queues are parameters: their URL is what moto answered when they were created), and every
    `!If` on a condition that never holds locally resolved to its other branch."""
    resources = template()["Resources"]
    return {
        variable: str(_resolve(value, parameters, resources)) for variable, value in environment_variables().items()
    }


def _resolve(value: Any, parameters: dict[str, str], resources: dict[str, Any]) -> Any:
    if isinstance(value, dict) and "Fn::If" in value:
        condition, _, otherwise = value["Fn::If"]
        if condition not in LOCAL_FALSE_CONDITIONS:
            raise ValueError(f"cannot resolve !If {condition} locally")
        return _resolve(otherwise, parameters, resources)
    if isinstance(value, dict) and "Ref" in value:
        target = value["Ref"]
        if target in parameters:
            return parameters[target]
        if resources.get(target, {}).get("Type") == "AWS::DynamoDB::Table":
            return table_name(target)
        if resources.get(target, {}).get("Type") == "AWS::S3::Bucket":
            return bucket_name(target)
        raise ValueError(f"cannot resolve !Ref {target} locally")
    return value
