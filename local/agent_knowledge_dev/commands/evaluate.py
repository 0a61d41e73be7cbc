"""`kb eval KB --questions FILE`: MRR@3, recall@3 and hit@1 of the KB's own questions, lexical, dense
and hybrid (`agent_knowledge_dev.evaluation`), on the local stack or a deployed one (`--aws --stack`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import CliError, print_json
from agent_knowledge_dev.target import add_target_arguments, connect, stack_embedding_settings


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument(
        "--questions",
        type=Path,
        required=True,
        metavar="FILE",
        help='JSONL: {"query": ..., "expected": [source keys or titles]} per line',
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (with every missed question)")
    add_target_arguments(parser)


def _run(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev.admin import require_knowledge_base
    from agent_knowledge_dev.evaluation import QuestionsInvalid, evaluate, read_questions, render

    try:
        questions = read_questions(arguments.questions)
    except QuestionsInvalid as exc:
        raise CliError(str(exc)) from None
    repositories = connect(arguments)
    require_knowledge_base(repositories, arguments.kb_id)
    from agent_knowledge.embedding.factory import make_embedder
    from agent_knowledge.settings import embedding_settings

    # Questions are embedded as the stack's search functions embed them: a deployed stack's
    # parameters say how; the local stack's environment is already this process's.
    settings = stack_embedding_settings(arguments.stack) if arguments.aws else embedding_settings()
    embedder = make_embedder(settings)
    report = evaluate(repositories, arguments.kb_id, questions, embedder)
    if arguments.json:
        print_json(report)
    else:
        print(render(report))
    return 0


COMMAND = Command("eval", "how well questions with known answers are found: lexical, dense, hybrid", _arguments, _run)
