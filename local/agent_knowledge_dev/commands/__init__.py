"""The CLI's subcommands, one module per group; `agent_knowledge_dev.cli` lists them."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One subcommand: a leaf with `run` (and `add_arguments`), or a group with `subcommands`."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    run: Run | None = None
    subcommands: Sequence[Command] = field(default_factory=tuple)
