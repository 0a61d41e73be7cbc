"""Translate template.yaml with the SAM translator, offline, as `sam package` + deploy would see it."""

from __future__ import annotations

from typing import Any

from agent_knowledge_dev.template import load_template

# The functions that answer agents' requests (they read; they never write documents or indexes).
QUERY_FUNCTIONS = (
    "CapabilitiesFunction",
    "SearchFunction",
    "ReadFunction",
    "McpFunction",
    "TurnsFunction",
    "CompleteRunFunction",
)
PARAMETERS = {"ServerTokenSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:token-AbCdEf"}


class _NoManagedPolicies:
    def load(self) -> dict[str, str]:  # the translator asks IAM for managed policy ARNs; the template names none
        return {}


def translate_template(parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """The translated template, with `parameters` beside PARAMETERS."""
    from samtranslator.translator.arn_generator import ArnGenerator
    from samtranslator.translator.transform import transform

    ArnGenerator.BOTO_SESSION_REGION_NAME = "us-east-1"
    document = load_template()
    # The translator works on packaged templates: replace local code paths as `sam package` would.
    for name, resource in document["Resources"].items():
        for uri in ("CodeUri", "ContentUri"):
            if uri in resource.get("Properties", {}):
                resource["Properties"][uri] = f"s3://artifacts/{name}.zip"
    return transform(document, {**PARAMETERS, **(parameters or {})}, _NoManagedPolicies())
