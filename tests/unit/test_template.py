"""template.yaml passes cfn-lint, translates with the SAM translator, and keeps its promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_knowledge.settings import ENVIRONMENT
from agent_knowledge_dev.template import TEMPLATE_PATH, environment_variables, function_routes, load_template
from tests.support.sam import translate_template


def test_template_passes_cfn_lint():
    from cfnlint.api import lint_all

    matches = lint_all(TEMPLATE_PATH.read_text(encoding="utf-8"))
    # Errors and warnings fail; informational suggestions (I-rules) do not.
    assert [str(m) for m in matches if m.rule.id[0] in "EW"] == []


@pytest.fixture(scope="module")
def translated():
    return translate_template()


def test_template_translates_to_cloudformation(translated):
    types = {r["Type"] for r in translated["Resources"].values()}
    assert {"AWS::Lambda::Function", "AWS::ApiGatewayV2::Api", "AWS::Lambda::LayerVersion"} <= types
    functions = [r for r in translated["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert {f["Properties"]["Runtime"] for f in functions} == {"python3.12"}
    assert all(f["Properties"]["TracingConfig"] == {"Mode": "Active"} for f in functions)


def test_every_setting_is_declared_in_the_template():
    assert set(ENVIRONMENT.values()) <= set(environment_variables())


def test_routes_are_the_protocol_routes():
    routes = {(r.method, r.path, r.short_name) for r in function_routes()}
    base = "/agent-api/v1/workspaces/{route}/knowledge"
    assert {
        ("GET", f"{base}/capabilities", "capabilities"),
        ("POST", f"{base}/search", "search"),
        ("POST", f"{base}/read", "read"),
        ("POST", "/agent-api/v1/workspaces/{route}/turns", "turns"),
        ("POST", "/agent-api/v1/runs/{run_id}/complete", "completerun"),
    } <= routes
    for route in function_routes():
        assert (route.code_uri / "app.py").is_file()
        assert route.handler == "app.lambda_handler"


def test_server_token_is_a_parameter_never_a_literal():
    document = load_template()
    assert environment_variables(document)["SERVER_TOKEN_SECRET_ID"] == {"Ref": "ServerTokenSecretArn"}
    assert document["Parameters"]["ServerTokenSecretArn"]["Type"] == "String"
    assert not any(r["Type"] == "AWS::SecretsManager::Secret" for r in document["Resources"].values())


def test_storage_is_encrypted_recoverable_and_private():
    document = load_template()
    for name, resource in document["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::DynamoDB::Table":
            assert properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], name
            assert properties["SSESpecification"]["SSEEnabled"], name
        if resource["Type"] == "AWS::S3::Bucket":
            assert properties["VersioningConfiguration"]["Status"] == "Enabled"
            assert all(properties["PublicAccessBlockConfiguration"].values())
            assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]


def test_functions_only_get_read_access_and_no_wildcard_allow():
    document = load_template()
    for name, resource in document["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        if name in {"CapabilitiesFunction", "SearchFunction", "ReadFunction"}:
            for policy in resource["Properties"]["Policies"]:
                (template_name,) = policy
                assert template_name in {"DynamoDBReadPolicy", "S3ReadPolicy", "AWSSecretsManagerGetSecretValuePolicy"}


def test_turn_functions_write_only_the_runs_table():
    document = load_template()
    for name in ("TurnsFunction", "CompleteRunFunction"):
        policies = document["Resources"][name]["Properties"]["Policies"]
        writes = [p for p in policies if "DynamoDBCrudPolicy" in p]
        assert writes == [{"DynamoDBCrudPolicy": {"TableName": {"Ref": "RunsTable"}}}], name
        for policy in policies:
            (template_name,) = policy
            assert template_name in {
                "DynamoDBReadPolicy",
                "DynamoDBCrudPolicy",
                "S3ReadPolicy",
                "AWSSecretsManagerGetSecretValuePolicy",
            }


def test_every_function_has_a_log_group_with_retention():
    document = load_template()
    functions = {n for n, r in document["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    groups = [r for r in document["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    covered = {g["Properties"]["LogGroupName"]["Fn::Sub"].rsplit("${", 1)[1].rstrip("}") for g in groups}
    assert functions <= covered
    assert all(g["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"} for g in groups)


def test_layer_is_built_from_shared():
    document = load_template()
    layer = document["Resources"]["AgentKnowledgeLayer"]
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert (Path(TEMPLATE_PATH).parent / "shared" / "requirements.txt").is_file()
