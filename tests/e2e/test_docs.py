"""The documentation stays true: the OpenAPI document is valid, and the README documents every
environment variable and every parameter of the template and every CLI command."""

from __future__ import annotations

from pathlib import Path

from openapi_spec_validator import validate

from agent_knowledge_dev.cli import COMMANDS
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.template import environment_variables, template
from tests.e2e.contract import spec

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_openapi_document_is_valid_openapi_3_1():
    validate(spec())
    assert spec()["openapi"].startswith("3.1")


def _mappings(node, path=()):
    """Every mapping of the document with its path, depth first."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _mappings(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _mappings(value, (*path, str(index)))


def test_openapi_has_no_flow_mapping_split_by_a_comma():
    # `{type: number, description: A ranking number, not a probability.}` is valid YAML and valid
    # OpenAPI: the comma ends the description and makes "not a probability." a key whose value is
    # null. The spec validator accepts it (unknown keywords are allowed), so look for the symptoms.
    problems = []
    for path, mapping in _mappings(spec()):
        where = "/".join(path)
        names_properties = path[-1:] == ("properties",)  # its keys are field names, not keywords
        for key, value in mapping.items():
            if not names_properties and key in ("description", "summary", "title") and not isinstance(value, str):
                problems.append(f"{where}/{key} is not a string: {value!r}")
            if any(char.isspace() for char in str(key)):
                problems.append(f"{where}: a key contains whitespace: {key!r}")
            if value is None:
                problems.append(f"{where}: {key!r} has no value")
    assert problems == []


def test_openapi_documents_the_three_knowledge_endpoints():
    paths = spec()["paths"]
    assert set(paths["/agent-api/v1/workspaces/{route}/knowledge/capabilities"]) >= {"get"}
    assert set(paths["/agent-api/v1/workspaces/{route}/knowledge/search"]) >= {"post"}
    assert set(paths["/agent-api/v1/workspaces/{route}/knowledge/read"]) >= {"post"}
    assert "not probabilities" in spec()["info"]["description"]


def test_readme_documents_every_environment_variable_of_the_template():
    missing = [name for name in environment_variables() if f"`{name}`" not in README]
    assert missing == []


def test_readme_documents_every_parameter_of_the_template():
    # A parameter need not reach the environment (memory and /tmp sizes go to the functions'
    # properties), so the variables' test alone let five of them go undocumented.
    parameters = template()["Parameters"]
    assert len(parameters) > 20  # the template read is the real one
    missing = [name for name in parameters if f"`{name}`" not in README]
    assert missing == []


def _leaves(commands: list[Command], prefix: str = "") -> list[str]:
    names = []
    for command in commands:
        name = f"{prefix}{command.name}"
        names.extend(_leaves(list(command.subcommands), name + " ") if command.subcommands else [name])
    return names


def test_readme_documents_every_cli_command():
    missing = [name for name in _leaves(COMMANDS) if f"`{name}" not in README]
    assert missing == []
