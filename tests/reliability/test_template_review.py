"""Security review of the deployed shape: the SAM-translated template's IAM, bucket, tables and API.

tests/unit/test_template.py checks which policy templates the source names; this file checks what
they become after the SAM transform — the actions and resources IAM will actually see — and the
relation between the AWS client's retry budget and the function timeout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_knowledge_dev.template import load_template
from tests.support.sam import translate_template

READ_ONLY_FUNCTIONS = ("CapabilitiesFunction", "SearchFunction", "ReadFunction", "McpFunction")
# Verbs that only read (and no Scan: a query function reads the items it names, never a table).
# kms:Decrypt, granted only when the secret has a customer-managed key, reads the secret's key.
READ_VERB = re.compile(r"^(Get|List|Query|BatchGet|Decrypt)[A-Za-z]*$")
MANAGED_POLICIES = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",  # its own log group
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",  # Tracing: Active
}
SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md"


@pytest.fixture(scope="module")
def cloudformation():
    return translate_template()


def _policies(role: dict) -> list[dict]:
    """The role's inline policies; a conditional one (`Fn::If`) counts with its policy branch."""
    policies = []
    for policy in role["Properties"].get("Policies", []):
        if "Fn::If" in policy:
            policies.extend(b for b in policy["Fn::If"][1:] if b != {"Ref": "AWS::NoValue"})
        else:
            policies.append(policy)
    return policies


def _statements(role: dict) -> list[dict]:
    return [statement for policy in _policies(role) for statement in policy["PolicyDocument"]["Statement"]]


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _roles(cloudformation) -> dict[str, dict]:
    return {name: r for name, r in cloudformation["Resources"].items() if r["Type"] == "AWS::IAM::Role"}


def test_no_allow_statement_has_a_wildcard_action_or_resource(cloudformation):
    roles = _roles(cloudformation)
    assert roles
    for name, role in roles.items():
        for statement in _statements(role):
            if statement["Effect"] != "Allow":
                continue
            for action in _listed(statement["Action"]):
                assert "*" not in action, (name, action)
            for resource in _listed(statement["Resource"]):
                if _listed(statement["Action"]) == ["bedrock:Rerank"]:
                    # IAM gives Rerank no resource type: "*" is the only resource it can have. It
                    # reaches no model alone; tests/unit/test_template.py checks that it comes only
                    # with bedrock:InvokeModel on the configured rerank model, under RerankModelId.
                    continue
                assert resource != "*", (name, statement)
        assert set(role["Properties"].get("ManagedPolicyArns", [])) <= MANAGED_POLICIES, name


@pytest.mark.parametrize("function", READ_ONLY_FUNCTIONS)
def test_the_protocol_functions_can_only_read(cloudformation, function):
    role_name = cloudformation["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    actions = [action for s in _statements(cloudformation["Resources"][role_name]) for action in _listed(s["Action"])]
    assert actions
    for action in actions:
        if action in {"bedrock:InvokeModel", "bedrock:Rerank"}:
            continue  # embedding a query or scoring passages (reranking) stores nothing
        service, verb = action.split(":", 1)
        assert service in {"dynamodb", "s3", "secretsmanager", "kms"}, action
        assert READ_VERB.match(verb), action


BUCKETS = ("BodiesBucket", "SourcesBucket")


@pytest.mark.parametrize("bucket", BUCKETS)
def test_each_bucket_denies_every_request_without_tls(cloudformation, bucket):
    resources = cloudformation["Resources"]
    buckets = {r["Properties"]["Bucket"]["Ref"] for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"}
    assert buckets == set(BUCKETS)
    (policy,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": bucket}
    ]
    denials = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert len(denials) == 1
    (deny,) = denials
    assert deny["Principal"] == "*" and deny["Action"] == "s3:*"
    # The bucket itself and every object in it.
    assert deny["Resource"] == [{"Fn::GetAtt": [bucket, "Arn"]}, {"Fn::Sub": f"${{{bucket}.Arn}}/*"}]


def test_tables_and_bucket_are_encrypted_at_rest_and_the_bucket_is_private(cloudformation):
    resources = cloudformation["Resources"]
    tables = [r for r in resources.values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert len(tables) >= 4
    assert all(t["Properties"]["SSESpecification"]["SSEEnabled"] is True for t in tables)
    buckets = {name: r for name, r in resources.items() if r["Type"] == "AWS::S3::Bucket"}
    assert set(buckets) == set(BUCKETS)
    for bucket in buckets.values():
        rules = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rules[0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
        assert set(bucket["Properties"]["PublicAccessBlockConfiguration"].values()) == {True}
        assert bucket["Properties"]["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]


def test_the_api_is_throttled_and_the_limits_are_documented(cloudformation):
    stages = [r for r in cloudformation["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    assert stages
    for stage in stages:
        settings = stage["Properties"]["DefaultRouteSettings"]
        assert settings["ThrottlingBurstLimit"] == {"Ref": "ApiThrottlingBurstLimit"}
        assert settings["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}
    parameters = cloudformation["Parameters"]
    assert parameters["ApiThrottlingBurstLimit"]["MinValue"] >= 1
    assert parameters["ApiThrottlingRateLimit"]["MinValue"] >= 1
    text = SECURITY_DOC.read_text(encoding="utf-8")
    assert "ApiThrottlingBurstLimit" in text and "ApiThrottlingRateLimit" in text


def test_traces_never_capture_responses():
    variables = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["POWERTOOLS_TRACER_CAPTURE_RESPONSE"] == "false"


def _worst_case_seconds(config) -> float:
    """One AWS call at its worst: every attempt waits out connect and read timeouts, and between
    attempts botocore's standard mode sleeps at most min(1 s x 2^i, 20 s) (throttling scale)."""
    attempts = config.retries["total_max_attempts"]
    backoff = sum(min(2**i, 20) for i in range(attempts - 1))
    return attempts * (config.connect_timeout + config.read_timeout) + backoff


@pytest.fixture
def own_aws_clients(monkeypatch: pytest.MonkeyPatch):
    """The layer's client factory with a botocore session of this test's own, dropped afterwards:
    a session created here, before moto is imported, would never route later tests' calls to moto."""
    from agent_knowledge.repositories import aws

    monkeypatch.setattr(aws, "_session", None)
    aws.reset_clients()
    yield aws
    aws.reset_clients()


@pytest.mark.parametrize("service", ["dynamodb", "s3", "secretsmanager"])
def test_one_aws_call_gives_up_before_the_function_times_out(service, own_aws_clients):
    config = own_aws_clients.client(service).meta.config
    assert config.retries["mode"] == "standard"
    assert config.retries["total_max_attempts"] == 3
    document = load_template()
    timeouts = [document["Globals"]["Function"]["Timeout"]] + [
        r["Properties"]["Timeout"]
        for r in document["Resources"].values()
        if r["Type"] == "AWS::Serverless::Function" and "Timeout" in r["Properties"]
    ]
    # Leave the handler at least 3 s for everything else it does after the failing call.
    assert _worst_case_seconds(config) + 3 <= min(timeouts)
