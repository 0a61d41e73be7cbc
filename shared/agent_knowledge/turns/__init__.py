"""Turns: server-side preparation of a run's frozen knowledge context, and run completion."""

from typing import TYPE_CHECKING

from agent_knowledge import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "start": "TurnOutcome start_turn",
        "context": "prepare_context",
        "completion": "complete_run run_of_caller",
        "models": "CompleteRunRequest CompleteRunResponse TurnRequest TurnResponse",
    },
)

if TYPE_CHECKING:
    from agent_knowledge.turns.completion import complete_run as complete_run
    from agent_knowledge.turns.completion import run_of_caller as run_of_caller
    from agent_knowledge.turns.context import prepare_context as prepare_context
    from agent_knowledge.turns.models import CompleteRunRequest as CompleteRunRequest
    from agent_knowledge.turns.models import CompleteRunResponse as CompleteRunResponse
    from agent_knowledge.turns.models import TurnRequest as TurnRequest
    from agent_knowledge.turns.models import TurnResponse as TurnResponse
    from agent_knowledge.turns.start import TurnOutcome as TurnOutcome
    from agent_knowledge.turns.start import start_turn as start_turn
