"""template.yaml passes cfn-lint, translates with the SAM translator, and keeps its promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_knowledge.settings import ENVIRONMENT
from agent_knowledge_dev.template import TEMPLATE_PATH, environment_variables, function_routes, load_template
from tests.support.sam import QUERY_FUNCTIONS, translate_template


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
        # MCP over Streamable HTTP: POST the messages; GET and DELETE reach the function to answer 405.
        ("POST", "/agent-api/v1/workspaces/{route}/mcp", "mcp"),
        ("GET", "/agent-api/v1/workspaces/{route}/mcp", "mcp"),
        ("DELETE", "/agent-api/v1/workspaces/{route}/mcp", "mcp"),
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


WRITE_VERBS = ("Put", "Update", "Delete", "BatchWrite", "Create")


def _allow_statements(function: str) -> list[dict]:
    """The function's IAM statements (both branches of a conditional policy), written out in full."""
    statements = []
    for policy in load_template()["Resources"][function]["Properties"]["Policies"]:
        if "Fn::If" in policy:
            branches = [b for b in policy["Fn::If"][1:] if b != {"Ref": "AWS::NoValue"}]
        else:
            branches = [policy]
        for branch in branches:
            # Plain statements only: SAM policy templates grant more than the functions use.
            assert set(branch) == {"Statement"}, (function, branch)
            statements.extend(branch["Statement"])
    return statements


def _resources(statement: dict) -> list:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def test_query_functions_never_scan_and_never_use_wildcards():
    for function in QUERY_FUNCTIONS:
        for statement in _allow_statements(function):
            assert statement["Effect"] == "Allow"
            for action in statement["Action"]:
                assert "*" not in action and action != "dynamodb:Scan", (function, action)
            if statement["Action"] == ["bedrock:Rerank"]:
                continue  # no resource type in IAM: "*" only (test_the_reranker_is_off_by_default...)
            assert "*" not in _resources(statement), function


def test_only_the_turn_functions_write_and_only_the_runs_table():
    for function in QUERY_FUNCTIONS:
        writes = [
            statement
            for statement in _allow_statements(function)
            if any(action.split(":")[1].startswith(WRITE_VERBS) for action in statement["Action"])
        ]
        if function in {"TurnsFunction", "CompleteRunFunction"}:
            assert writes and all(s["Resource"] == {"Fn::GetAtt": ["RunsTable", "Arn"]} for s in writes), function
        else:
            assert writes == [], function
    (complete,) = [
        s for s in _allow_statements("CompleteRunFunction") if s["Resource"] == {"Fn::GetAtt": ["RunsTable", "Arn"]}
    ]
    assert "dynamodb:DeleteItem" not in complete["Action"]


def test_s3_grants_name_the_key_prefixes_the_code_writes():
    from agent_knowledge.index_format.layout import IndexFile, file_key, manifest_key
    from agent_knowledge.repositories.bodies import body_key

    prefixes = {
        "SearchFunction": {"indexes/"},
        "ReadFunction": {"bodies/"},
        "McpFunction": {"indexes/", "bodies/"},
        "TurnsFunction": {"indexes/", "bodies/"},
    }
    assert body_key("kb", "doc", "rev").startswith("bodies/")
    assert manifest_key("kb", 1).startswith("indexes/")
    assert file_key("kb", f"{'0' * 32}.idx", IndexFile(sha256="a" * 64, size=1)).startswith("indexes/")
    for function, expected in prefixes.items():
        objects = [
            r["Fn::Sub"] for s in _allow_statements(function) if "s3:GetObject" in s["Action"] for r in _resources(s)
        ]
        assert {o.removeprefix("${BodiesBucket.Arn}/").removesuffix("*") for o in objects} == expected, function


def test_the_secret_key_may_be_decrypted_only_through_secrets_manager_and_only_when_configured():
    document = load_template()
    assert document["Parameters"]["ServerTokenKmsKeyArn"]["Default"] == ""
    for function in QUERY_FUNCTIONS:
        secret_readers = [s for s in _allow_statements(function) if "secretsmanager:GetSecretValue" in s["Action"]]
        policies = document["Resources"][function]["Properties"]["Policies"]
        conditional = [p["Fn::If"] for p in policies if "Fn::If" in p and p["Fn::If"][0] == "HasServerTokenKmsKey"]
        if not secret_readers:
            assert conditional == [], function
            continue
        (branches,) = conditional
        assert branches[0] == "HasServerTokenKmsKey" and branches[2] == {"Ref": "AWS::NoValue"}
        (kms,) = branches[1]["Statement"]
        assert kms["Action"] == ["kms:Decrypt"] and kms["Resource"] == {"Ref": "ServerTokenKmsKeyArn"}
        assert kms["Condition"] == {
            "StringEquals": {"kms:ViaService": {"Fn::Sub": "secretsmanager.${AWS::Region}.amazonaws.com"}}
        }


def test_bedrock_may_be_invoked_only_on_the_configured_model_and_only_by_the_functions_that_embed():
    document = load_template()
    parameters = document["Parameters"]
    assert parameters["EmbeddingProvider"]["AllowedValues"] == ["bedrock", "none"]
    assert parameters["EmbeddingModelId"]["Default"] == "amazon.titan-embed-text-v2:0"
    assert parameters["EmbeddingDimensions"]["AllowedValues"] == [256, 512, 1024]
    variables = document["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["EMBEDDING_PROVIDER"] == {"Ref": "EmbeddingProvider"}
    assert variables["EMBEDDING_MODEL_ID"] == {"Ref": "EmbeddingModelId"}
    assert variables["EMBEDDING_DIMENSIONS"] == {"Ref": "EmbeddingDimensions"}
    model_arn = {"Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${EmbeddingModelId}"}
    embedding = {"SearchFunction", "McpFunction", "TurnsFunction", "IndexerFunction"}
    functions = [n for n, r in document["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]
    for function in functions:
        policies = document["Resources"][function]["Properties"].get("Policies", [])
        invoking = [
            policy
            for policy in policies
            if any("bedrock" in str(action) for statement in _statements_of(policy) for action in statement["Action"])
            and _condition_of(policy) != "Reranks"  # the reranker's grant: the next test
        ]
        if function not in embedding:
            assert invoking == [], function
            continue
        (policy,) = invoking
        condition, granted, otherwise = policy["Fn::If"]
        assert condition == "UsesBedrockEmbeddings" and otherwise == {"Ref": "AWS::NoValue"}, function
        (statement,) = granted["Statement"]
        assert statement["Action"] == ["bedrock:InvokeModel"] and statement["Resource"] == model_arn, function
    assert document["Conditions"]["UsesBedrockEmbeddings"] == {"Fn::Equals": [{"Ref": "EmbeddingProvider"}, "bedrock"]}


SEARCHING_FUNCTIONS = ("SearchFunction", "McpFunction", "TurnsFunction")


def test_the_reranker_is_off_by_default_and_reaches_only_its_model_from_the_functions_that_search():
    document = load_template()
    parameter = document["Parameters"]["RerankModelId"]
    assert parameter["Default"] == ""
    assert parameter["AllowedValues"] == ["", "amazon.rerank-v1:0", "cohere.rerank-v3-5:0"]
    assert document["Conditions"]["Reranks"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "RerankModelId"}, ""]}]}
    assert "RERANK_MODEL_ID" not in document["Globals"]["Function"]["Environment"]["Variables"]
    model_arn = {"Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${RerankModelId}"}
    functions = [n for n, r in document["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]
    for function in functions:
        properties = document["Resources"][function]["Properties"]
        variables = properties.get("Environment", {}).get("Variables", {})
        rerank_grants = [p for p in properties.get("Policies", []) if _condition_of(p) == "Reranks"]
        rerank_actions = [
            action
            for policy in properties.get("Policies", [])
            for statement in _statements_of(policy)
            for action in statement["Action"]
            if action == "bedrock:Rerank"
        ]
        if function not in SEARCHING_FUNCTIONS:
            assert "RERANK_MODEL_ID" not in variables and rerank_grants == [] and rerank_actions == [], function
            continue
        assert variables["RERANK_MODEL_ID"] == {"Ref": "RerankModelId"}, function
        (policy,) = rerank_grants
        _, granted, otherwise = policy["Fn::If"]
        assert otherwise == {"Ref": "AWS::NoValue"}, function
        # Rerank takes both actions; only InvokeModel can name a model, and it names the one chosen.
        invoke, rerank = granted["Statement"]
        assert invoke["Action"] == ["bedrock:InvokeModel"] and invoke["Resource"] == model_arn, function
        assert rerank["Action"] == ["bedrock:Rerank"] and rerank["Resource"] == "*", function
        assert "Condition" not in invoke and "Condition" not in rerank, function
        assert rerank_actions == ["bedrock:Rerank"], function  # granted nowhere else


def _condition_of(policy: dict) -> str | None:
    return policy["Fn::If"][0] if "Fn::If" in policy else None


def _statements_of(policy: dict) -> list[dict]:
    if "Fn::If" in policy:
        return [s for branch in policy["Fn::If"][1:] if isinstance(branch, dict) for s in branch.get("Statement", [])]
    return list(policy.get("Statement", []))


def test_every_function_has_a_log_group_with_retention():
    document = load_template()
    functions = {n for n, r in document["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    groups = [r for r in document["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    named = [g for g in groups if "LogGroupName" in g["Properties"]]
    covered = {g["Properties"]["LogGroupName"]["Fn::Sub"].rsplit("${", 1)[1].rstrip("}") for g in named}
    assert functions <= covered
    assert all(g["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"} for g in groups)


def test_layer_is_built_from_shared():
    document = load_template()
    layer = document["Resources"]["AgentKnowledgeLayer"]
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert (Path(TEMPLATE_PATH).parent / "shared" / "requirements.txt").is_file()
