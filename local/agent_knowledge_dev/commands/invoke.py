"""`agent-knowledge invoke FUNCTION EVENT.json`: one handler call, like `sam local invoke -e`.

Runs against the running `serve`'s stack when there is one (so it sees what you ingested), else
against a fresh in-process moto stack seeded with the demo workspace. Prints the handler's return
value as JSON on stdout; function logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import CliError, note, print_json


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("function", metavar="FUNCTION", help="capabilities, search, read, turns, ingest, indexer, ...")
    parser.add_argument(
        "event", metavar="EVENT.json", type=Path, help="an HTTP API v2 event, or an SQS event (ingest, indexer)"
    )


def read_event(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"event file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read event file {path}: {exc}") from None
    try:
        event = json.loads(text)
    except ValueError as exc:
        raise CliError(f"event file {path} is not valid JSON: {exc}") from None
    if not isinstance(event, dict):
        raise CliError(f"event file {path} must hold a JSON object")
    return event


def _run(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev.functions import find_function, load_handler
    from agent_knowledge_dev.lambda_context import LambdaContext
    from agent_knowledge_dev.localstate import running_server
    from agent_knowledge_dev.runtime import use_local_backend, use_stack_environment

    route = find_function(arguments.function)
    event = read_event(arguments.event)
    server = running_server()
    if server is not None:
        use_local_backend(server.moto_endpoint)
        use_stack_environment(server.environment)
        result = load_handler(route)(event, LambdaContext.for_function(route.function))
    else:
        note("no running `agent-knowledge serve`: using a fresh in-process stack with the demo workspace")
        result = _invoke_in_process(route, event)
    print_json(result)
    return 0


def _invoke_in_process(route: Any, event: dict[str, Any]) -> Any:
    from agent_knowledge_dev.demo import seed_demo, seed_sample_documents
    from agent_knowledge_dev.functions import function_logs_to_stderr, load_handler
    from agent_knowledge_dev.lambda_context import LambdaContext
    from agent_knowledge_dev.runtime import use_local_backend
    from agent_knowledge_dev.stacks import in_process_stack

    use_local_backend(None)
    with in_process_stack() as stack:
        function_logs_to_stderr()  # seeding logs too; Powertools names its logger from the environment
        seed_demo(stack.repositories)
        seed_sample_documents(stack.repositories)
        return load_handler(route)(event, LambdaContext.for_function(route.function))


COMMAND = Command("invoke", "run one function with an event file and print its response", _arguments, _run)
