"""Turns: server-side preparation of a run's frozen knowledge context, and run completion."""

from typing import TYPE_CHECKING

from agent_knowledge import lazy_exports

_EXPORTS = {
    "TurnOutcome": "start",
    "start_turn": "start",
    "prepare_context": "context",
    "complete_run": "completion",
    "run_of_caller": "completion",
    "CompleteRunRequest": "models",
    "CompleteRunResponse": "models",
    "TurnRequest": "models",
    "TurnResponse": "models",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
