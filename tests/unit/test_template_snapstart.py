"""SnapStart as a template option (issue 36, item 4): the `SnapStart` parameter reaches the protocol
functions only, each behind its `live` alias that the API calls, and caps their /tmp at the 512 MB
SnapStart allows."""

from __future__ import annotations

import pytest

from agent_knowledge_dev.template import load_template
from tests.support.sam import QUERY_FUNCTIONS, translate_template

STORAGE = {
    "SearchFunction": "SearchEphemeralStorageSize",
    "McpFunction": "SearchEphemeralStorageSize",
    "ReadFunction": "ReadEphemeralStorageSize",
    "TurnsFunction": "TurnsEphemeralStorageSize",
}


def functions(translated: dict) -> dict[str, dict]:
    return {name: r for name, r in translated["Resources"].items() if r["Type"] == "AWS::Lambda::Function"}


def test_the_parameter_defaults_to_none_and_allows_published_versions_only():
    parameter = load_template()["Parameters"]["SnapStart"]
    assert parameter["Default"] == "None" and parameter["AllowedValues"] == ["None", "PublishedVersions"]
    assert load_template()["Conditions"]["UsesSnapStart"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "PublishedVersions"]}


@pytest.mark.parametrize("value", ["None", "PublishedVersions"])
def test_protocol_functions_take_snapstart_behind_the_alias_the_api_calls(value):
    translated = translate_template({"SnapStart": value})
    resources = translated["Resources"]
    for name, function in functions(translated).items():
        snapstart = function["Properties"].get("SnapStart")
        if name in QUERY_FUNCTIONS:
            assert snapstart == {"ApplyOn": {"Ref": "SnapStart"}}
            alias = resources[f"{name}Aliaslive"]
            assert alias["Type"] == "AWS::Lambda::Alias" and alias["Properties"]["FunctionName"] == {"Ref": name}
        else:  # the ingest, indexer and reconciler: queue- and schedule-driven, no snapshot
            assert snapstart is None and f"{name}Aliaslive" not in resources
    # Every route's integration and invoke permission name the alias, never the unpublished function.
    api = next(r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Api")
    uris = [
        operation["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
        for path in api["Properties"]["Body"]["paths"].values()
        for operation in path.values()
    ]
    assert uris and all("Aliaslive}/invocations" in uri for uri in uris)
    permissions = [
        r["Properties"]["FunctionName"] for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"
    ]
    assert {p["Ref"] for p in permissions if "Ref" in p} >= {f"{name}Aliaslive" for name in QUERY_FUNCTIONS}


def test_snapstart_caps_the_protocol_functions_tmp_at_512_mb_and_sizing_knows_it():
    translated = translate_template({"SnapStart": "PublishedVersions"})
    found = functions(translated)
    for name, parameter in STORAGE.items():
        size = found[name]["Properties"]["EphemeralStorage"]["Size"]
        assert size == {"Fn::If": ["UsesSnapStart", 512, {"Ref": parameter}]}
    for name in set(QUERY_FUNCTIONS) - set(STORAGE):  # the default 512 MB
        assert "EphemeralStorage" not in found[name]["Properties"]
    variables = found["SearchFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["SEARCH_EPHEMERAL_STORAGE_MB"] == {
        "Fn::If": ["UsesSnapStart", 512, {"Ref": "SearchEphemeralStorageSize"}]
    }
