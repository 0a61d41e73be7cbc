"""`task create|pause|resume|cancel`: managed tasks, an operator's tool (never an agent token's)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge_dev.arguments import add_ttl_argument
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import print_json
from agent_knowledge_dev.target import add_target_arguments, connect
from agent_knowledge_dev.tasks_admin import DEFAULT_TASK_TTL, MAX_TASK_TTL


def _create_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--member",
        dest="members",
        metavar="SESSION_ID",
        nargs="+",
        action="extend",
        required=True,
        help="member sessions (one or more, or repeat the flag); members become task-required",
    )
    add_ttl_argument(parser, MAX_TASK_TTL, DEFAULT_TASK_TTL, "30 days")
    add_target_arguments(parser)


def _create(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev.tasks_admin import create_task

    print_json(create_task(connect(arguments), arguments.members, ttl=arguments.ttl))
    return 0


def _task_id_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_id", metavar="TASK_ID")
    add_target_arguments(parser)


def _state_change(name: str) -> Callable[[argparse.Namespace], int]:
    def run(arguments: argparse.Namespace) -> int:
        from agent_knowledge_dev import tasks_admin

        change: Callable[[Repositories, str], dict[str, str]] = getattr(tasks_admin, f"{name}_task")
        print_json(change(connect(arguments), arguments.task_id))
        return 0

    return run


COMMAND = Command(
    "task",
    "managed tasks: members, state",
    subcommands=[
        Command("create", "create an active task and print {task_id, scope_hash}", _create_arguments, _create),
        Command(
            "pause",
            "pause a task: its runs and bound turns answer task_not_active",
            _task_id_arguments,
            _state_change("pause"),
        ),
        Command("resume", "resume a paused task", _task_id_arguments, _state_change("resume")),
        Command("cancel", "cancel a task for good", _task_id_arguments, _state_change("cancel")),
    ],
)
