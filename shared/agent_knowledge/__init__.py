"""Agent knowledge protocol (`bailing.agent-knowledge.v1`) — the shared Lambda layer.

Domain code here knows nothing of API Gateway: handlers in `functions/` parse events,
call into this package and map its errors to HTTP with `agent_knowledge.runtime.http`.
"""
