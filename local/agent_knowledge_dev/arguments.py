"""Argument parsing that keeps the CLI's promise: a mistake is one line on stderr and exit status 1.

- `OneLineParser`: argparse reports usage errors as a usage block and exit status 2; ours raise
  `CliError` (one line naming the subcommand, and where to look for help).
- `bounded_int`: an argparse `type` for whole numbers within bounds (`--ttl`, `--workers`);
  `add_ttl_argument`: the `--ttl SECONDS` lifetime of what a command issues (sessions, tasks).
- `json_option`: a JSON option validated against a pydantic model: strict JSON (no duplicate keys),
  an object, no unknown keys (with a "did you mean" for near misses: `tenant` → `tenants`), and no
  type coercion (`"yes"` is not a boolean). Records ignore unknown keys when they are *read* from
  storage; what a person types must not be half understood.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable
from typing import NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from agent_knowledge_dev.console import CliError

ModelT = TypeVar("ModelT", bound=BaseModel)
ROOT_PROG = "agent-knowledge"


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(ROOT_PROG).strip()
        where = f"{command}: " if command else ""
        help_hint = f"`{self.prog} --help`"
        raise CliError(f"{where}{' '.join(message.split())} (see {help_hint})")


def bounded_int(low: int, high: int, meaning: str = "") -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high`; `meaning` explains the upper bound."""
    bound = f"{high} ({meaning})" if meaning else str(high)

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            positive = "a positive whole number" if low == 1 else f"a whole number from {low}"
            raise argparse.ArgumentTypeError(f"must be {positive}, at most {bound}; got {text!r}")
        return value

    return parse


def add_ttl_argument(parser: argparse.ArgumentParser, maximum: int, default: int, maximum_meaning: str) -> None:
    """`--ttl SECONDS`: a lifetime from 1 second to `maximum` (`maximum_meaning` says it in words: "7 days")."""
    parser.add_argument(
        "--ttl",
        type=bounded_int(1, maximum, maximum_meaning),
        default=default,
        metavar="SECONDS",
        help=f"lifetime, 1-{maximum} ({maximum_meaning}; default {default})",
    )


def json_option(option: str, text: str, model: type[ModelT], what: str, example: str) -> ModelT:
    """`text` as a `model`, or a one-line `CliError` that starts with "OPTION is not a valid WHAT"."""
    from agent_knowledge import wire as strict_json

    def refuse(detail: str) -> NoReturn:
        raise CliError(f"{option} is not a valid {what}: {detail}")

    try:
        value = strict_json.loads(text)
    except strict_json.JsonRejected as exc:
        refuse(str(exc).removeprefix("request body: "))
    except (ValueError, RecursionError) as exc:
        refuse(f"not valid JSON ({exc})" if isinstance(exc, ValueError) else "not valid JSON")
    if not isinstance(value, dict):
        refuse(f"must be a JSON object, e.g. {example}")
    allowed = sorted(model.model_fields)
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            suggestion = f" (did you mean {close[0]!r}?)" if close else ""
            refuse(f"unknown key {key!r}{suggestion}; allowed keys: {', '.join(allowed)}")
    try:
        return model.model_validate(value, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ())) or "value"
        refuse(f"{field}: {first.get('msg', 'invalid value')}")
