"""What each API function's `app.py` shares: its Lambda entry point and the request a route sees.

A function's module is then only its route: parse the body, call the operation with the
`Authorization` header, answer (docs/DESIGN.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths

from agent_knowledge.core.headers import header
from agent_knowledge.core.observability import Handler, logger, metrics, traced
from agent_knowledge.dependencies import Dependencies
from agent_knowledge.identity.caller import Workspace, open_run, open_workspace
from agent_knowledge.records import RunRecord
from agent_knowledge.runtime import snapstart
from agent_knowledge.runtime.container import create_clients_at_init, default_dependencies
from agent_knowledge.runtime.http import resolve


@dataclass(frozen=True)
class ApiRequest:
    deps: Dependencies
    event: dict[str, Any]

    @property
    def authorization(self) -> str | None:
        return header(self.event, "authorization")

    def open_workspace(self, route: str) -> Workspace:
        """The caller revalidated and the route's scope read, now (`identity.caller.open_workspace`),
        for the routes that read nothing alongside (capabilities, MCP messages other than a tool
        call); the operations with a body open it themselves (`knowledge.search.search_knowledge`,
        `knowledge.read.read_knowledge`, `turns.start.start_turn`)."""
        return open_workspace(
            self.deps.repositories, self.authorization, route, self.deps.clock(), oauth=self.deps.oauth
        )

    def open_run(self, run_id: str) -> RunRecord:
        """The caller revalidated against the run's route, and the run, if the caller owns it
        (`identity.caller.open_run`): the routes that name a run instead of a workspace."""
        return open_run(self.deps.repositories, self.authorization, run_id, self.deps.clock(), oauth=self.deps.oauth)


def current_request(app: APIGatewayHttpResolver) -> ApiRequest:
    """Inside a route: the container's dependencies and the raw API Gateway event."""
    return ApiRequest(app.context["deps"], app.current_event.raw_event)


def api_entry_point(app: APIGatewayHttpResolver, request_metric: str, clients: tuple[str, ...]) -> Handler:
    """`lambda_handler(event, context, deps=None)` for `app`: Lambda context and correlation id in
    the logs, tracing when enabled, one `request_metric` count per request, metrics flushed.
    Tests and the local runtime pass `deps`; Lambda never does.

    Called at import, it creates the AWS `clients` the function will use (`create_clients_at_init`)
    and registers SnapStart's hooks (`runtime/snapstart`: renewed after a restore)."""
    create_clients_at_init(*clients)
    snapstart.register(clients)

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @traced
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, Any]:
        metrics.add_metric(name=request_metric, unit="Count", value=1)
        return resolve(app, event, context, deps=deps or default_dependencies())

    return lambda_handler
