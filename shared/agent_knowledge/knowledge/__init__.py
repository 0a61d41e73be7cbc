"""The protocol calls — capabilities, search, read — their byte budgets, hints and body windows."""

from typing import TYPE_CHECKING

from agent_knowledge import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "capabilities": "describe_capabilities",
        "search": "SearchOutcome search_knowledge",
        "read": "read_knowledge",
        "hints": "fit_hints hint_drafts iso_utc issue_reference search_status",
        "body_window": "BodyWindow read_body_window",
        "read_budget": "PagePlan plan_page window_end",
        "search_budget": "HintDraft fit_search_response",
    },
)

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
