"""README "From deploy to a connected agent", run as written: every `$A ...` command of the section
(all of them `--aws --stack $STACK`), in order, against a deployed stack that moto stands in for —
a CloudFormation stack whose outputs name the tables, buckets and queues of the local stack, which
the CLI reads with `describe_stacks` as it does on AWS. A command added to the section is run too.

The AWS calls of the commands an agent platform automates (issuing and revoking sessions) are
recorded and pinned: they are the IAM actions the README names for that job. The section's URLs
are routes of the template."""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_knowledge.errors import Unauthorized
from agent_knowledge.identity.caller import open_workspace
from agent_knowledge.repositories import aws
from agent_knowledge_dev import target
from agent_knowledge_dev.template import PROJECT_ROOT, function_routes
from tests.integration import test_cli

# The CLI test module's local stack (one per module), its environment reset and its `run`.
running_stack = test_cli.running_stack
_restore_environment = test_cli._restore_environment
run = test_cli.run

SECTION = "## From deploy to a connected agent"
STACK = "ak-readme-path"
ROUTE_PARAMETER = "{route}"


def _section() -> str:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(SECTION + "\n") == 1, f"README has no section {SECTION!r}"
    return readme.split(SECTION + "\n", 1)[1].split("\n## ", 1)[0]


def _shell_lines(section: str) -> Iterator[str]:
    """The lines of the section's `sh` blocks, continuation lines joined, comments dropped."""
    for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            yield line.split("  #", 1)[0].strip()


def _commands(section: str) -> list[list[str]]:
    return [shlex.split(line)[1:] for line in _shell_lines(section) if line.startswith("$A ")]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The AWS operations the CLI's own clients make (not the local pipeline's), as (service,
    operation), in order."""
    made: list[tuple[str, str]] = []
    create = target._session

    def recording_session() -> Any:
        session = create()

        def record(model: Any, **_: Any) -> None:
            made.append((model.service_model.service_name, model.name))

        session.register("before-call", record)
        return session

    monkeypatch.setattr(target, "_session", recording_session)
    return made


def _substitute(word: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        word = word.replace(name, value)
    return word


def test_every_command_of_the_deployed_path_runs_against_a_deployed_stack(run, calls, tmp_path: Path) -> None:
    commands = _commands(_section())
    verbs = [" ".join(command[:2]) for command in commands]
    # The path the section walks; each command is also checked for what it did, below.
    assert verbs[:8] == [
        "kb create", "doc put", "kb status", "kb reindex", "route put", "client put", "session issue", "session revoke"
    ]  # fmt: skip
    assert all(command[-3:] == ["--aws", "--stack", "$STACK"] for command in commands), commands

    run("kb", "list")  # points this process at the local stack (moto stands in for AWS here)
    sqs = aws.client("sqs")
    queues = {
        "SourceQueueUrl": os.environ["SOURCE_QUEUE_URL"],
        "IndexQueueUrl": os.environ["INDEX_QUEUE_URL"],
        "SourceDeadLetterQueueUrl": sqs.get_queue_url(QueueName="SourceDeadLetterQueue")["QueueUrl"],
        "IndexDeadLetterQueueUrl": sqs.get_queue_url(QueueName="IndexDeadLetterQueue.fifo")["QueueUrl"],
    }
    test_cli._create_stack(STACK, {**test_cli._local_outputs(), **queues})
    folder = tmp_path / "manuals"
    folder.mkdir()
    (folder / "leave.md").write_text("# Parental leave\n\nTwenty weeks, paid in full.\n", encoding="utf-8")
    (folder / "laptop.md").write_text("# Lost laptop\n\nReport it to the service desk at once.\n", encoding="utf-8")
    values = {"$STACK": STACK, "./manuals": str(folder)}
    results: dict[str, Any] = {}
    operations: dict[str, set[tuple[str, str]]] = {}
    for command, verb in zip(commands, verbs, strict=True):
        arguments = [_substitute(word, values) for word in command]
        assert all("$" not in word and "<" not in word for word in arguments), f"unknown placeholder in {command}"
        target._stack_names.cache_clear()  # each command is a process of its own: it reads the outputs again
        calls.clear()
        result = run(*arguments)
        assert result.status == 0, (arguments, result.stderr)
        results[verb] = result.json()
        operations[verb] = set(calls)
        if verb == "session issue":
            values["<session_id>"] = results[verb]["session_id"]
            token = results[verb]["access_token"]
            caller = open_workspace(
                test_cli._repositories(), f"Bearer {token}", "support", time.time(), oauth=lambda: None
            ).caller
            assert caller.session.principal is not None and caller.session.principal.id == "alice"
            assert results[verb]["expires_at_epoch"] - time.time() == pytest.approx(604_800, abs=60)

    assert results["kb create"]["kb_id"] == "manuals"
    put = results["doc put"]
    assert (put["created"], put["ready"], put["failed"], put["not_uploaded"]) == (2, 2, 0, [])
    assert (results["kb status"]["objects"], results["kb status"]["ready"]) == (2, 2)
    assert isinstance(results["kb reindex"]["index_generation"], int)
    assert results["route put"]["knowledge"]["sources"][0]["kb_id"] == "manuals"
    assert results["client put"]["allowed_routes"] == ["support"]
    assert results["session revoke"]["revoked"] is True
    with pytest.raises(Unauthorized):  # revoked: the next call refuses the bearer
        open_workspace(test_cli._repositories(), f"Bearer {token}", "support", time.time(), oauth=lambda: None)

    # What an agent platform's job needs to issue and revoke sessions (README: IAM actions).
    describe = ("cloudformation", "DescribeStacks")
    assert operations["session issue"] == {describe, ("dynamodb", "GetItem"), ("dynamodb", "PutItem")}
    assert operations["session revoke"] == {
        describe,
        ("dynamodb", "Query"),
        ("dynamodb", "GetItem"),
        ("dynamodb", "UpdateItem"),
    }
    assert {service for verb in verbs for service, _ in operations[verb]} <= {"cloudformation", "dynamodb", "s3", "sqs"}
    aws.client("s3").delete_objects(
        Bucket=test_cli._sources_bucket(),
        Delete={"Objects": [{"Key": "manuals/leave.md"}, {"Key": "manuals/laptop.md"}]},
    )


def test_the_urls_of_the_deployed_path_are_routes_of_the_template() -> None:
    section = _section()
    paths = set(re.findall(r"\$API_URL(/agent-api/v1/[A-Za-z0-9_/{}-]*[A-Za-z0-9_}])", section))
    assert len(paths) >= 3  # knowledge routes and the MCP endpoint
    patterns = [
        re.compile("^" + re.escape(route.path).replace(re.escape(ROUTE_PARAMETER), "[a-z0-9-]+") + "$")
        for route in function_routes()
    ]
    workspace = "/agent-api/v1/workspaces/support/knowledge"
    for path in paths:
        if path == workspace:  # the base the knowledge routes hang off
            continue
        assert any(pattern.match(path) for pattern in patterns), path
