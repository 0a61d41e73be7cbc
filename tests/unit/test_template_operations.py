"""template.yaml is ready to operate: retention, lifecycle, access logs, alarms, dashboard,
concurrency and architecture (docs/DESIGN.md §12). These are properties an operator relies on and
that no functional test would notice if they disappeared."""

from __future__ import annotations

import json
import re

import pytest

from agent_knowledge_dev.template import load_template
from tests.support.sam import QUERY_FUNCTIONS

STATEFUL_TYPES = {"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::Logs::LogGroup"}
# Access-log variables that could carry a credential or a caller's data.
FORBIDDEN_LOG_VARIABLES = re.compile(
    r"\$(context\.authorizer|request\.|input\.|stageVariables)|querystring|header|rawQueryString|path",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def template():
    return load_template()


def _of_type(template, resource_type: str) -> dict[str, dict]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == resource_type}


def _functions(template) -> dict[str, dict]:
    return _of_type(template, "AWS::Serverless::Function")


def test_every_stateful_resource_is_retained_on_delete_and_on_replacement(template):
    stateful = {name: r for name, r in template["Resources"].items() if r["Type"] in STATEFUL_TYPES}
    assert len(stateful) >= 4 + 1 + 5 + 1  # tables, bucket, function log groups, access log group
    for name, resource in stateful.items():
        assert resource.get("DeletionPolicy") == "Retain", name
        assert resource.get("UpdateReplacePolicy") == "Retain", name


def test_buckets_expire_noncurrent_versions_and_abort_incomplete_uploads(template):
    for name, bucket in _of_type(template, "AWS::S3::Bucket").items():
        rules = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
        assert all(rule["Status"] == "Enabled" for rule in rules), name
        expiring = [r for r in rules if "NoncurrentVersionExpiration" in r]
        assert [r["NoncurrentVersionExpiration"] for r in expiring] == [
            {"NoncurrentDays": {"Ref": "NoncurrentVersionExpirationDays"}}
        ], name
        aborting = [r["AbortIncompleteMultipartUpload"] for r in rules if "AbortIncompleteMultipartUpload" in r]
        assert aborting and all(a["DaysAfterInitiation"] >= 1 for a in aborting), name
        # No rule ever expires current versions: ingest and the indexer delete what they own.
        assert not any("ExpirationInDays" in r or "ExpirationDate" in r for r in rules), name
    assert template["Parameters"]["NoncurrentVersionExpirationDays"]["MinValue"] >= 1


def test_api_access_log_is_structured_and_never_records_credentials_or_query_strings(template):
    (api,) = _of_type(template, "AWS::Serverless::HttpApi").values()
    settings = api["Properties"]["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    line = json.loads(settings["Format"])  # one JSON object per request
    variables = set(line.values())
    for wanted in (
        "$context.requestId",
        "$context.routeKey",
        "$context.status",
        "$context.responseLatency",
        "$context.integrationLatency",
        "$context.integrationErrorMessage",
    ):
        assert wanted in variables
    for value in variables:
        assert re.fullmatch(r"\$context\.[A-Za-z.]+", value), value
        assert not FORBIDDEN_LOG_VARIABLES.search(value), value


def _actions(alarm: dict) -> tuple:
    properties = alarm["Properties"]
    return properties.get("AlarmActions"), properties.get("OKActions")


def _watched(alarm: dict) -> list[tuple[str, str, tuple]]:
    """(namespace, metric, dimensions) of every metric the alarm reads."""
    properties = alarm["Properties"]
    if "MetricName" in properties:
        specs = [properties]
    else:
        specs = [m["MetricStat"]["Metric"] for m in properties["Metrics"] if "MetricStat" in m]
    return [
        (
            spec["Namespace"],
            spec["MetricName"],
            tuple((d["Name"], json.dumps(d["Value"], sort_keys=True)) for d in spec.get("Dimensions", [])),
        )
        for spec in specs
    ]


def test_alarms_cover_the_api_every_function_every_table_and_index_lag(template):
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    watched = {metric for alarm in alarms.values() for metric in _watched(alarm)}

    def ref(name: str) -> str:
        return json.dumps({"Ref": name})

    api = ("ApiId", ref("KnowledgeApi"))
    assert ("AWS/ApiGateway", "5xx", (api,)) in watched and ("AWS/ApiGateway", "Count", (api,)) in watched
    for function in _functions(template):
        for metric in ("Errors", "Throttles"):
            assert ("AWS/Lambda", metric, (("FunctionName", ref(function)),)) in watched, (function, metric)
    for table in _of_type(template, "AWS::DynamoDB::Table"):
        for metric in ("ReadThrottleEvents", "WriteThrottleEvents"):
            assert ("AWS/DynamoDB", metric, (("TableName", ref(table)),)) in watched, (table, metric)
    # The contract with the indexer (docs/DESIGN.md §10): namespace, name and dimension it emits.
    lag = ("AgentKnowledge", "IndexLagSeconds", (("Service", json.dumps("agent-knowledge")),))
    assert lag in watched
    for name, alarm in alarms.items():
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching", name
        topic = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
        assert _actions(alarm) == (topic, topic), name
    assert template["Parameters"]["AlarmTopicArn"]["Default"] == ""


def test_the_index_lag_contract_is_the_one_the_design_record_states(template):
    from pathlib import Path

    design = (Path(__file__).resolve().parents[2] / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    assert "`IndexLagSeconds`" in design and "`AgentKnowledge`" in design and "`Service` = `agent-knowledge`" in design
    assert template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "agent-knowledge"
    assert (
        template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "AgentKnowledge"
    )


def test_the_dashboard_body_is_json_once_substituted(template):
    (dashboard,) = _of_type(template, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    names = set(re.findall(r"\$\{([A-Za-z0-9:]+)\}", body))
    assert names <= set(template["Resources"]) | {"AWS::Region"}
    widgets = json.loads(re.sub(r"\$\{[A-Za-z0-9:]+\}", "x", body))["widgets"]
    titles = " ".join(w["properties"]["title"] for w in widgets)
    for topic in ("API", "errors", "throttles", "DynamoDB", "Index lag"):
        assert topic in titles


def test_reserved_concurrency_is_a_parameter_per_function_class_and_unset_by_default(template):
    classes = {
        "QueryReservedConcurrency": set(QUERY_FUNCTIONS),
        "IngestReservedConcurrency": {"IngestFunction"},
        "IndexReservedConcurrency": {"IndexerFunction"},
    }
    for parameter_name in classes:
        parameter = template["Parameters"][parameter_name]
        assert parameter["Default"] == -1 and parameter["MinValue"] == -1
        assert template["Conditions"][f"Has{parameter_name}"] == {
            "Fn::Not": [{"Fn::Equals": [{"Ref": parameter_name}, "-1"]}]
        }
    functions = _functions(template)
    # The reconciler runs on a schedule, one invocation per period: nothing to reserve or cap.
    unreserved = {"ReconcilerFunction"}
    assert set(functions) == set().union(*classes.values(), unreserved)
    assert all("ReservedConcurrentExecutions" not in functions[name]["Properties"] for name in unreserved)
    for parameter_name, names in classes.items():
        for name in names:
            setting = functions[name]["Properties"]["ReservedConcurrentExecutions"]
            assert setting == {"Fn::If": [f"Has{parameter_name}", {"Ref": parameter_name}, {"Ref": "AWS::NoValue"}]}, (
                name
            )


def test_functions_and_layer_are_arm64(template):
    assert template["Globals"]["Function"]["Architectures"] == ["arm64"]
    assert not any("Architectures" in f["Properties"] for f in _functions(template).values())
    (layer,) = _of_type(template, "AWS::Serverless::LayerVersion").values()
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
