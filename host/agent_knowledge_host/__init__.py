"""Host side of bailing.agent-knowledge.v1: a client that applies the spec's host rules, and an MCP server.

from agent_knowledge_host import KnowledgeClient
client = KnowledgeClient("http://127.0.0.1:3000", "demo", lambda: token)
"""

from agent_knowledge_host.client import KnowledgeClient
from agent_knowledge_host.models import Capabilities, Hint, Negotiation, ReadChain, ReadPage, SearchResult, Turn

__all__ = ["Capabilities", "Hint", "KnowledgeClient", "Negotiation", "ReadChain", "ReadPage", "SearchResult", "Turn"]
