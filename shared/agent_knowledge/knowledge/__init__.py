"""The protocol calls — capabilities, search, read — their byte budgets, hints and body windows."""

from typing import TYPE_CHECKING

from agent_knowledge import lazy_exports

_EXPORTS = {
    "describe_capabilities": "capabilities",
    "SearchOutcome": "search",
    "search_knowledge": "search",
    "read_knowledge": "read",
    "fit_hints": "hints",
    "hint_drafts": "hints",
    "iso_utc": "hints",
    "issue_reference": "hints",
    "search_status": "hints",
    "BodyWindow": "body_window",
    "read_body_window": "body_window",
    "PagePlan": "read_budget",
    "plan_page": "read_budget",
    "window_end": "read_budget",
    "HintDraft": "search_budget",
    "fit_search_response": "search_budget",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from agent_knowledge.knowledge.body_window import BodyWindow as BodyWindow
    from agent_knowledge.knowledge.body_window import read_body_window as read_body_window
    from agent_knowledge.knowledge.capabilities import describe_capabilities as describe_capabilities
    from agent_knowledge.knowledge.hints import fit_hints as fit_hints
    from agent_knowledge.knowledge.hints import hint_drafts as hint_drafts
    from agent_knowledge.knowledge.hints import iso_utc as iso_utc
    from agent_knowledge.knowledge.hints import issue_reference as issue_reference
    from agent_knowledge.knowledge.hints import search_status as search_status
    from agent_knowledge.knowledge.read import read_knowledge as read_knowledge
    from agent_knowledge.knowledge.read_budget import PagePlan as PagePlan
    from agent_knowledge.knowledge.read_budget import plan_page as plan_page
    from agent_knowledge.knowledge.read_budget import window_end as window_end
    from agent_knowledge.knowledge.search import SearchOutcome as SearchOutcome
    from agent_knowledge.knowledge.search import search_knowledge as search_knowledge
    from agent_knowledge.knowledge.search_budget import HintDraft as HintDraft
    from agent_knowledge.knowledge.search_budget import fit_search_response as fit_search_response
