"""The ingestion pipeline's resources in template.yaml (issue 15): the sources bucket, its events,
the queues, the functions' event source mappings and their exact permissions."""

from __future__ import annotations

import pytest

from agent_knowledge_dev.template import environment_variables, load_template
from tests.support.sam import translate_template


@pytest.fixture(scope="module")
def resources():
    return load_template()["Resources"]


@pytest.fixture(scope="module")
def translated():
    return translate_template()["Resources"]


def test_sources_bucket_is_private_versioned_encrypted_and_expires_old_versions(resources):
    bucket = resources["SourcesBucket"]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled"
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == {"Ref": "NoncurrentVersionExpirationDays"}
    policy = resources["SourcesBucketPolicy"]["Properties"]
    (deny,) = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_every_object_created_and_removed_event_goes_to_the_source_queue(resources):
    bucket = resources["SourcesBucket"]
    queues = bucket["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    assert queues == [
        {"Event": "s3:ObjectCreated:*", "Queue": {"Fn::GetAtt": ["SourceQueue", "Arn"]}},
        {"Event": "s3:ObjectRemoved:*", "Queue": {"Fn::GetAtt": ["SourceQueue", "Arn"]}},
    ]
    # S3 checks it may send to the queue when the configuration is created: the policy first.
    assert bucket["DependsOn"] == "SourceQueuePolicy"


def test_only_this_stacks_bucket_may_send_to_the_source_queue(resources):
    bucket_name = resources["SourcesBucket"]["Properties"]["BucketName"]["Fn::Sub"]
    statements = resources["SourceQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"} and allow["Action"] == "sqs:SendMessage"
    assert allow["Resource"] == {"Fn::GetAtt": ["SourceQueue", "Arn"]}
    source_arn = allow["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::Sub"]
    # The same name, computed from the stack id, not referenced (a reference would be circular).
    assert source_arn[0] == "arn:${AWS::Partition}:s3:::" + bucket_name[0] and source_arn[1] == bucket_name[1]
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )


def test_queues_redrive_to_dead_letter_queues_that_raise_alarms(resources):
    source, index = resources["SourceQueue"]["Properties"], resources["IndexQueue"]["Properties"]
    ingest_timeout = resources["IngestFunction"]["Properties"]["Timeout"]
    indexer_timeout = resources["IndexerFunction"]["Properties"]["Timeout"]
    assert source["VisibilityTimeout"] >= 6 * ingest_timeout and index["VisibilityTimeout"] >= 6 * indexer_timeout
    assert source["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["SourceDeadLetterQueue", "Arn"]}
    assert index["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["IndexDeadLetterQueue", "Arn"]}
    assert index["FifoQueue"] is True and index["ContentBasedDeduplication"] is False
    assert resources["IndexDeadLetterQueue"]["Properties"]["FifoQueue"] is True
    for queue in ("SourceQueue", "IndexQueue", "SourceDeadLetterQueue", "IndexDeadLetterQueue"):
        assert resources[queue]["Properties"]["SqsManagedSseEnabled"] is True
    alarmed = {
        r["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"].get("Namespace") == "AWS/SQS"
    }
    assert {"SourceDeadLetterQueue", "IndexDeadLetterQueue"} <= alarmed


@pytest.mark.parametrize(
    ("mapping", "queue", "function"),
    [
        ("IngestEventSourceMapping", "SourceQueue", "IngestFunction"),
        ("IndexerEventSourceMapping", "IndexQueue", "IndexerFunction"),
    ],
)
def test_event_source_mappings_report_partial_batch_failures(resources, mapping, queue, function):
    properties = resources[mapping]["Properties"]
    assert properties["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert properties["FunctionName"] == {"Ref": function}
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 <= properties["BatchSize"] <= 10
    assert resources[function]["Properties"]["CodeUri"] == f"functions/{function.removesuffix('Function').lower()}/"


def test_the_pipeline_is_configured_through_the_environment(resources):
    variables = environment_variables()
    assert variables["SOURCES_BUCKET"] == {"Ref": "SourcesBucket"}
    assert variables["INDEX_QUEUE_URL"] == {"Ref": "IndexQueue"}
    assert variables["SOURCE_QUEUE_URL"] == {"Ref": "SourceQueue"}
    outputs = load_template()["Outputs"]
    for name, target in [
        ("SourcesBucketName", "SourcesBucket"),
        ("SourceQueueUrl", "SourceQueue"),
        ("SourceDeadLetterQueueUrl", "SourceDeadLetterQueue"),
        ("IndexQueueUrl", "IndexQueue"),
        ("IndexDeadLetterQueueUrl", "IndexDeadLetterQueue"),
    ]:
        assert outputs[name]["Value"] == {"Ref": target}


def _statements(translated, function: str) -> dict[str, tuple[set[str], list]]:
    role = translated[translated[function]["Properties"]["Role"]["Fn::GetAtt"][0]]["Properties"]
    assert set(role["ManagedPolicyArns"]) == {
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
    }
    found = {}
    for policy in role["Policies"]:
        if "Fn::If" in policy:  # a conditional grant (e.g. Bedrock): its granted branch
            condition, policy, otherwise = policy["Fn::If"]
            assert otherwise == {"Ref": "AWS::NoValue"}, condition
        for statement in policy["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resource = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            found[statement["Sid"]] = (set(actions), resource)
    return found


KB_ITEMS_ONLY = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["kb#*"]}}
CONSUME_QUEUE = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"}
PIPELINE_ACCESS = {
    "IngestFunction": {
        "ReadSourceObjects": ({"s3:GetObject", "s3:GetObjectVersion"}, [{"Fn::Sub": "${SourcesBucket.Arn}/*"}]),
        "ReadKnowledgeBases": ({"dynamodb:GetItem"}, [{"Fn::GetAtt": ["ConfigTable", "Arn"]}]),
        "WriteDocumentRecords": ({"dynamodb:GetItem", "dynamodb:PutItem"}, [{"Fn::GetAtt": ["DocumentsTable", "Arn"]}]),
        "WriteDocumentBodies": (
            {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
            [{"Fn::Sub": "${BodiesBucket.Arn}/bodies/*"}],
        ),
        "RequestIndexing": ({"sqs:SendMessage"}, [{"Fn::GetAtt": ["IndexQueue", "Arn"]}]),
        # S3 answers 404 (not 403) for a missing version or body only with ListBucket.
        "TellMissingObjectsFromDenied": (
            {"s3:ListBucket"},
            [{"Fn::GetAtt": ["SourcesBucket", "Arn"]}, {"Fn::GetAtt": ["BodiesBucket", "Arn"]}],
        ),
        "ConsumeSourceEvents": (CONSUME_QUEUE, [{"Fn::GetAtt": ["SourceQueue", "Arn"]}]),
    },
    "IndexerFunction": {
        "ClaimIndexGenerations": (
            {"dynamodb:GetItem", "dynamodb:UpdateItem"},
            [{"Fn::GetAtt": ["ConfigTable", "Arn"]}],
        ),
        "ReadDocumentRecordsAndClearPendingMarks": (
            {"dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"},
            [{"Fn::GetAtt": ["DocumentsTable", "Arn"]}, {"Fn::Sub": "${DocumentsTable.Arn}/index/pending"}],
        ),
        "ReadDocumentBodies": ({"s3:GetObject"}, [{"Fn::Sub": "${BodiesBucket.Arn}/bodies/*"}]),
        "PublishAndPruneIndexes": (
            {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
            [{"Fn::Sub": "${BodiesBucket.Arn}/indexes/*"}],
        ),
        # Listing a KB's index files finds the ones no kept generation references (to delete them);
        # unconditioned, it also makes S3 answer 404 for a missing body or manifest.
        "ListIndexFilesAndTellMissingObjectsFromDenied": ({"s3:ListBucket"}, [{"Fn::GetAtt": ["BodiesBucket", "Arn"]}]),
        "ConsumeIndexingRequests": (CONSUME_QUEUE, [{"Fn::GetAtt": ["IndexQueue", "Arn"]}]),
        # A KB whose documents still lack vectors after a pass is handed to the next run.
        "ContinueEmbeddingBacklog": ({"sqs:SendMessage"}, [{"Fn::GetAtt": ["IndexQueue", "Arn"]}]),
        # Only with EmbeddingProvider=bedrock (UsesBedrockEmbeddings), and only the configured model.
        "EmbedChunksWithTheConfiguredModel": (
            {"bedrock:InvokeModel"},
            [{"Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${EmbeddingModelId}"}],
        ),
    },
    # Reads the bucket listing and the records, writes only `last_sync` and queue messages: every
    # record change is the ingest's, through the same path as an S3 event.
    "ReconcilerFunction": {
        "ListSourceObjects": ({"s3:ListBucket"}, [{"Fn::GetAtt": ["SourcesBucket", "Arn"]}]),
        "ReadKnowledgeBasesAndRecordLastSync": (
            {"dynamodb:GetItem", "dynamodb:UpdateItem"},
            [{"Fn::GetAtt": ["ConfigTable", "Arn"]}],
        ),
        "ReadDocumentStates": ({"dynamodb:Query"}, [{"Fn::GetAtt": ["DocumentsTable", "Arn"]}]),
        "RequestReconciles": ({"sqs:SendMessage"}, [{"Fn::GetAtt": ["SourceQueue", "Arn"]}]),
        "RequestIndexing": ({"sqs:SendMessage"}, [{"Fn::GetAtt": ["IndexQueue", "Arn"]}]),
        # The current index manifest's versions (a rebuild asked for after an upgrade), nothing else.
        "ReadIndexManifests": ({"s3:GetObject"}, [{"Fn::Sub": "${BodiesBucket.Arn}/indexes/*/manifests/*"}]),
    },
}
# The one statement of each function on the config table: limited to knowledge-base items.
CONFIG_STATEMENT = {
    "IngestFunction": "ReadKnowledgeBases",
    "IndexerFunction": "ClaimIndexGenerations",
    "ReconcilerFunction": "ReadKnowledgeBasesAndRecordLastSync",
}


@pytest.mark.parametrize("function", list(PIPELINE_ACCESS))
def test_a_pipeline_function_has_exactly_the_access_it_needs(translated, resources, function):
    assert _statements(translated, function) == PIPELINE_ACCESS[function]
    statements = resources[function]["Properties"]["Policies"][0]["Statement"]
    assert next(s for s in statements if s["Sid"] == CONFIG_STATEMENT[function])["Condition"] == KB_ITEMS_ONLY


def test_the_pending_index_and_tombstone_ttl_exist(resources):
    table = resources["DocumentsTable"]["Properties"]
    (pending,) = table["GlobalSecondaryIndexes"]
    assert pending["IndexName"] == "pending"
    assert pending["KeySchema"] == [
        {"AttributeName": "kb_id", "KeyType": "HASH"},
        {"AttributeName": "index_pending_since", "KeyType": "RANGE"},
    ]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}


def test_the_reconciler_runs_on_a_schedule_parameter_and_is_retried_by_the_next_run(resources, translated):
    function = resources["ReconcilerFunction"]["Properties"]
    assert function["CodeUri"] == "functions/reconciler/" and function["Handler"] == "app.lambda_handler"
    (event,) = function["Events"].values()
    assert event["Type"] == "Schedule" and event["Properties"]["Schedule"] == {"Ref": "ReconcileSchedule"}
    parameter = load_template()["Parameters"]["ReconcileSchedule"]
    assert parameter["Default"] == "rate(15 minutes)"
    assert function["EventInvokeConfig"] == {"MaximumRetryAttempts": 0}
    # It stops starting KBs a minute before its timeout (ingest/reconcile.py TIME_MARGIN_SECONDS).
    from agent_knowledge.ingest.reconcile import TIME_MARGIN_SECONDS

    assert function["Timeout"] > 2 * TIME_MARGIN_SECONDS
    rules = [r for r in translated.values() if r["Type"] == "AWS::Events::Rule"]
    assert [rule["Properties"]["ScheduleExpression"] for rule in rules] == [{"Ref": "ReconcileSchedule"}]
