"""Read `template.yaml` — the one description of tables, bucket, environment and routes.

The local stack, the local API gateway and the tests all derive from it, so the schema used
locally cannot drift from what `sam deploy` creates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = PROJECT_ROOT / "template.yaml"


# libyaml's parser when PyYAML was built with it: the pure-Python one took 1-3 s for the template,
# which every `doc list` and `kb status` reads (the queue names); same tags, same safe constructor.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _CloudFormationLoader(_SafeLoader):
    """SafeLoader that turns CloudFormation short tags into their long form (`!Ref X` → {"Ref": "X"})."""


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_CloudFormationLoader.add_multi_constructor("!", _construct_tag)


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_CloudFormationLoader)  # noqa: S506 - SafeLoader subclass


@functools.cache
def template() -> dict[str, Any]:
    return load_template()


def resources_of_type(resource_type: str, document: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    document = document or template()
    return {name: r for name, r in document["Resources"].items() if r.get("Type") == resource_type}


@dataclass(frozen=True)
class FunctionRoute:
    """One HTTP API route and the function behind it, as the template declares them."""

    function: str  # logical id, e.g. "SearchFunction"
    method: str  # upper case
    path: str  # e.g. /agent-api/v1/workspaces/{route}/knowledge/search
    code_uri: Path
    handler: str  # "module.function"

    @property
    def short_name(self) -> str:
        """`capabilities` for `CapabilitiesFunction` — the name the CLI's `invoke` accepts."""
        return self.function.removesuffix("Function").lower()


def function_routes(document: dict[str, Any] | None = None) -> list[FunctionRoute]:
    routes = []
    for name, resource in resources_of_type("AWS::Serverless::Function", document).items():
        properties = resource["Properties"]
        for event in (properties.get("Events") or {}).values():
            if event.get("Type") != "HttpApi":
                continue
            routes.append(
                FunctionRoute(
                    function=name,
                    method=str(event["Properties"]["Method"]).upper(),
                    path=event["Properties"]["Path"],
                    code_uri=PROJECT_ROOT / properties["CodeUri"],
                    handler=properties["Handler"],
                )
            )
    return routes


def environment_variables(document: dict[str, Any] | None = None) -> dict[str, Any]:
    """Globals.Function.Environment.Variables, unresolved (values may be {"Ref": ...})."""
    document = document or template()
    return dict(document["Globals"]["Function"]["Environment"]["Variables"])


def function_setting(function: str, name: str, default: Any) -> Any:
    """A function's own property `name` (e.g. MemorySize, Timeout), else Globals.Function's, else `default`."""
    document = template()
    own = document["Resources"][function]["Properties"].get(name)
    value = own if own is not None else document.get("Globals", {}).get("Function", {}).get(name, default)
    if isinstance(value, dict) and "Ref" in value:  # a template parameter: its default, as a deploy without overrides
        value = document["Parameters"][value["Ref"]]["Default"]
    return value
