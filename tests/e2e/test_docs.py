"""The documentation stays true: the OpenAPI document is valid, and the README documents every
environment variable of the template and every CLI command."""

from __future__ import annotations

from pathlib import Path

from openapi_spec_validator import validate

from agent_knowledge_dev.cli import COMMANDS
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.template import environment_variables
from tests.e2e.contract import spec

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_openapi_document_is_valid_openapi_3_1():
    validate(spec())
    assert spec()["openapi"].startswith("3.1")


def test_openapi_documents_the_three_knowledge_endpoints():
    paths = spec()["paths"]
    assert set(paths["/agent-api/v1/workspaces/{route}/knowledge/capabilities"]) >= {"get"}
    assert set(paths["/agent-api/v1/workspaces/{route}/knowledge/search"]) >= {"post"}
    assert set(paths["/agent-api/v1/workspaces/{route}/knowledge/read"]) >= {"post"}
    assert "not probabilities" in spec()["info"]["description"]


def test_readme_documents_every_environment_variable_of_the_template():
    missing = [name for name in environment_variables() if f"`{name}`" not in README]
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
