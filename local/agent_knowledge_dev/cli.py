"""`agent-knowledge`: the local API, handler invocation and the admin commands.

Subcommands are a table. Each module under `agent_knowledge_dev.commands` exposes `COMMAND`, a
`Command` (name, help, how to add its arguments, what to run, or nested `subcommands`). To add a
subcommand — e.g. `mcp` — write `agent_knowledge_dev/commands/mcp.py` with

    COMMAND = Command("mcp", "serve the knowledge tools over MCP", add_arguments=_arguments, run=_run)

and register it here: import the module below and append `mcp.COMMAND` to `COMMANDS`. `run` gets the
parsed `argparse.Namespace` and returns the exit status; raise `CliError("what to do")` for a user
mistake (one line on stderr, exit 1, no traceback) — argument errors are reported the same way
(`agent_knowledge_dev.arguments`). Add a row for it to the README's "Admin CLI"
table too: tests/e2e/test_docs.py checks that every command is documented.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

from agent_knowledge_dev.arguments import ROOT_PROG, OneLineParser
from agent_knowledge_dev.commands import Command, documents, invoke, mcp, serve, sessions, tasks, token, workspace
from agent_knowledge_dev.console import CliError, LocalStackStopped

# As the template sets it for the functions (template.yaml, Globals): one BLAS thread. It must be
# set before numpy is first imported (none of the imports above import it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

COMMANDS: list[Command] = [
    serve.COMMAND,
    invoke.COMMAND,
    *workspace.COMMANDS,  # client, route, kb
    documents.COMMAND,  # doc
    sessions.COMMAND,  # session
    token.COMMAND,  # token (the local test issuer of serve --oauth)
    tasks.COMMAND,  # task
    mcp.COMMAND,  # the host package's MCP server
]


def build_parser(commands: Sequence[Command] = COMMANDS, argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `argv`, only the command it names gets its arguments (the others
    only their name and help): building some commands' arguments imports what they run (`mcp` the
    MCP SDK's host package), which every other command would pay for at start-up."""
    # Subparsers are built with the parent's class, so every level reports errors in one line.
    parser = OneLineParser(
        prog=ROOT_PROG,
        description="Run the agent knowledge API locally and administer a local or deployed stack.",
    )
    parser.add_argument("--version", action="version", version=f"{ROOT_PROG} {package_version()}")
    _add_commands(parser, commands, None if argv is None else [word for word in argv if not word.startswith("-")])
    return parser


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-knowledge")
    except PackageNotFoundError:  # run from a checkout without `pip install -e .`
        return "unknown (not installed)"


def _add_commands(parser: argparse.ArgumentParser, commands: Sequence[Command], words: list[str] | None) -> None:
    """`words`: the words of the command line that are not options (None: build everything)."""
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True)
    chosen = words[0] if words else None
    for command in commands:
        child = subparsers.add_parser(command.name, help=command.help, description=command.help)
        selected = words is None or command.name == chosen
        if command.subcommands:
            _add_commands(child, command.subcommands, None if words is None else words[1:] if selected else [])
            continue
        if command.add_arguments and selected:
            command.add_arguments(child)
        child.set_defaults(run=command.run)


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] = COMMANDS) -> int:
    from agent_knowledge_dev.target import forget_connected_serve

    forget_connected_serve()
    try:
        arguments = build_parser(commands, sys.argv[1:] if argv is None else argv).parse_args(argv)
        if arguments.run.__module__ == "agent_knowledge_dev.commands.serve":
            return int(arguments.run(arguments) or 0)
        with _layer_logs_quiet():
            return int(arguments.run(arguments) or 0)
    except CliError as error:
        print(f"agent-knowledge: {error}", file=sys.stderr)
        return error.status
    except KeyboardInterrupt:
        print("agent-knowledge: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        # Storage and AWS errors are not bugs of the caller's making, but a trace is no help either.
        message = _known_failure(error)
        if message is None:
            raise
        from agent_knowledge_dev.target import local_stack_stopped

        if local_stack_stopped():  # not a failure of this call: the whole local stack is gone
            stopped = LocalStackStopped()
            print(f"agent-knowledge: {stopped}", file=sys.stderr)
            return stopped.status
        print(f"agent-knowledge: {message}", file=sys.stderr)
    return 1


@contextlib.contextmanager
def _layer_logs_quiet() -> Iterator[None]:
    """A command that runs the layer's code (kb sync, the direct ingest path) would print its INFO
    lines, meant for CloudWatch, on stderr: while it runs, the layer's logger (created on first
    import) logs warnings only, under the CLI's name. The environment is restored afterwards."""
    wanted = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_SERVICE_NAME": "agent-knowledge-cli"}
    saved = {name: os.environ.get(name) for name in wanted}
    for name, value in wanted.items():
        os.environ.setdefault(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _known_failure(error: Exception) -> str | None:
    from botocore.exceptions import BotoCoreError, ClientError
    from pydantic import ValidationError

    from agent_knowledge.errors import AgentKnowledgeError
    from agent_knowledge_dev.admin import AdminError

    if isinstance(error, AgentKnowledgeError):
        return error.message
    if isinstance(error, AdminError):
        return str(error)
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ())) or "value"
        return f"invalid {field}: {first.get('msg', 'invalid value')}"
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        return f"AWS refused the request: {details.get('Code', 'error')}: {details.get('Message', '')}".rstrip(": ")
    if isinstance(error, BotoCoreError):
        return f"cannot reach AWS: {error}"
    return None


if __name__ == "__main__":
    sys.exit(main())
