"""Check a real HTTP reply against docs/openapi.yaml: the status is documented for the operation,
the body matches the documented schema, and the required headers are there."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from openapi_schema_validator import OAS31Validator

SPEC_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
WORKSPACE_PATH = "/agent-api/v1/workspaces/{route}/knowledge/"


@functools.cache
def spec() -> dict[str, Any]:
    return yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    reference = node.get("$ref")
    if reference is None:
        return node
    target: Any = spec()
    for part in reference.removeprefix("#/").split("/"):
        target = target[part]
    return _resolve(target)


def documented_schema(method: str, endpoint: str, status: int) -> dict[str, Any]:
    operation = spec()["paths"][WORKSPACE_PATH + endpoint][method.lower()]
    responses = operation["responses"]
    assert str(status) in responses, f"{method} {endpoint} answered {status}, which docs/openapi.yaml does not document"
    return _resolve(responses[str(status)])["content"]["application/json"]["schema"]


def assert_matches_spec(reply: Any, method: str, endpoint: str) -> None:
    schema = documented_schema(method, endpoint, reply.status)
    # Validate against the spec as the root document, so `#/components/...` references resolve.
    validator = OAS31Validator(
        {**schema, "components": spec()["components"]}, format_checker=OAS31Validator.FORMAT_CHECKER
    )
    validator.validate(reply.json())
    assert reply.headers["cache-control"] == "no-store"
    assert reply.headers["content-type"] == "application/json"
