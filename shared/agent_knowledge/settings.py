"""Configuration: one validated model read from environment variables once per container.

Every variable is declared in `template.yaml` (Globals.Function.Environment); there are no
literal table or bucket names anywhere in the code.
"""

import os

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_knowledge.errors import ConfigurationError
from agent_knowledge.runtime.per_container import per_container


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    sessions_table: str = Field(min_length=1)
    config_table: str = Field(min_length=1)
    documents_table: str = Field(min_length=1)
    runs_table: str = Field(min_length=1)
    bodies_bucket: str = Field(min_length=1)
    # Secrets Manager id (name or ARN) of the existing server token; references and
    # cursors are signed with sub-keys derived from it.
    server_token_secret_id: str = Field(min_length=1)
    # How long a run stays usable after it is created (DynamoDB TTL removes it later).
    run_ttl_seconds: int = Field(default=86_400, ge=60)
    # The ingestion pipeline (docs/DESIGN.md §10): the bucket operators upload documents to, and the
    # FIFO queue the ingest function hands changes to the indexer on. The pipeline functions refuse
    # to start without them (`require_pipeline`); the query functions never read them.
    sources_bucket: str = ""
    index_queue_url: str = ""
    # The queue the bucket's events arrive on: the reconciler sends its reconcile messages there.
    source_queue_url: str = ""
    # OAuth 2.1 resource-server mode (identity/oauth.py, docs/DESIGN.md §15): the trusted issuer
    # (its OpenID discovery document is <issuer>/.well-known/openid-configuration), the audience its
    # access tokens must name, the claims that carry roles, tenant and client id, and the scopes the
    # protected-resource metadata publishes. No issuer: bearer-token mode (session tokens only).
    oauth_issuer: str = ""
    oauth_audience: str = ""
    oauth_roles_claim: str = "roles"
    oauth_tenant_claim: str = "tenant"
    oauth_client_id_claim: str = ""
    oauth_scopes: str = ""

    @field_validator("oauth_issuer")
    @classmethod
    def _issuer_url(cls, value: str) -> str:
        from agent_knowledge.identity.oauth import check_issuer_url

        return check_issuer_url(value) if value else value

    def require_pipeline(self) -> None:
        # The source queue only the reconciler needs: it checks for it (`ingest/reconcile.py`).
        missing = [ENVIRONMENT[name] for name in ("sources_bucket", "index_queue_url") if not getattr(self, name)]
        if missing:
            raise ConfigurationError(f"invalid or missing environment variables: {', '.join(missing)}")


ENVIRONMENT = {
    "sessions_table": "SESSIONS_TABLE",
    "config_table": "CONFIG_TABLE",
    "documents_table": "DOCUMENTS_TABLE",
    "runs_table": "RUNS_TABLE",
    "bodies_bucket": "BODIES_BUCKET",
    "server_token_secret_id": "SERVER_TOKEN_SECRET_ID",
    "run_ttl_seconds": "RUN_TTL_SECONDS",
    "sources_bucket": "SOURCES_BUCKET",
    "index_queue_url": "INDEX_QUEUE_URL",
    "source_queue_url": "SOURCE_QUEUE_URL",
    "oauth_issuer": "OAUTH_ISSUER",
    "oauth_audience": "OAUTH_AUDIENCE",
    "oauth_roles_claim": "OAUTH_ROLES_CLAIM",
    "oauth_tenant_claim": "OAUTH_TENANT_CLAIM",
    "oauth_client_id_claim": "OAUTH_CLIENT_ID_CLAIM",
    "oauth_scopes": "OAUTH_SCOPES",
}


@per_container
def get_settings() -> Settings:
    values = {field: os.environ[var] for field, var in ENVIRONMENT.items() if var in os.environ}
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        missing = ", ".join(ENVIRONMENT[str(e["loc"][0])] for e in exc.errors() if e["loc"])
        raise ConfigurationError(f"invalid or missing environment variables: {missing}") from None


def reset_settings() -> None:
    """Forget the cached settings (tests change the environment between cases)."""
    get_settings.reset()
