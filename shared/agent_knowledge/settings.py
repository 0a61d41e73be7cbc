"""Configuration: one validated model read from environment variables once per container.

Every variable is declared in `template.yaml`; there are no literal table or bucket names
anywhere in the code. `Settings` has three sections, each with its own variables: `embedding`
(which embedder, docs/retrieval.md "Dense retrieval"), `sizing` (each function's ephemeral storage,
`index_format/sizing.py`) and `rerank` (the optional reranker, `retrieval/rerank.py`); and the
Origins a browser may call MCP from (`allowed_origins`, `mcp/origins.py`). The container reads
them once (`runtime/container.py`) and `Dependencies` carries them; code below takes what it
needs as parameters and never reads the environment itself.

EMBEDDING_PROVIDER     local | local-e5 | bedrock | none (lexical only; the default when unset — the
                       template sets bedrock, `make serve` and the tests local; local-e5 is
                       multilingual-e5-small, opt-in and local only: embedding/e5.py)
EMBEDDING_MODEL_ID     bedrock: the model id (default Titan Text Embeddings v2); local, local-e5:
                       must be empty or the bundled model's id
EMBEDDING_DIMENSIONS   bedrock: 256, 512 or 1024 (Titan v2's choices; default 1024); local: 512;
                       local-e5: 384
SEARCH_EPHEMERAL_STORAGE_MB, INDEXER_EPHEMERAL_STORAGE_MB
                       the template's `SearchEphemeralStorageSize` and `IndexerEphemeralStorageSize`;
                       a process without them (the local runner) assumes the template's default
RERANK_MODEL_ID        one of RERANK_MODELS, or empty: reranking off (the default; always off locally)
MCP_ALLOWED_ORIGINS    origins besides the API's own that may call MCP, comma-separated (default none)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent_knowledge.core.per_container import per_container
from agent_knowledge.errors import ConfigurationError
from agent_knowledge.mcp.origins import ENVIRONMENT_VARIABLE as ALLOWED_ORIGINS_VARIABLE
from agent_knowledge.mcp.origins import parse_allowed_origins

Provider = Literal["local", "local-e5", "bedrock", "none"]

TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
LOCAL_DIMENSIONS = 512
E5_DIMENSIONS = 384

DEFAULT_EPHEMERAL_STORAGE_MB = 2048  # template.yaml's default for search, turns and the indexer

RerankModelId = Literal["amazon.rerank-v1:0", "cohere.rerank-v3-5:0"]
RERANK_MODELS: tuple[str, ...] = get_args(RerankModelId)


class EmbeddingSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Provider = "none"
    model_id: str = ""
    dimensions: int | None = None

    @model_validator(mode="after")
    def _fits_the_provider(self) -> EmbeddingSettings:
        if self.provider == "bedrock" and self.dimensions is not None:
            if self.dimensions not in TITAN_V2_DIMENSIONS and self.resolved_model_id == TITAN_V2_MODEL_ID:
                raise ValueError(f"Titan Text Embeddings v2 gives 256, 512 or 1024 dimensions, not {self.dimensions}")
        if self.provider == "local" and self.dimensions not in (None, LOCAL_DIMENSIONS):
            raise ValueError(f"the local model gives {LOCAL_DIMENSIONS} dimensions, not {self.dimensions}")
        if self.provider == "local-e5" and self.dimensions not in (None, E5_DIMENSIONS):
            raise ValueError(f"multilingual-e5-small gives {E5_DIMENSIONS} dimensions, not {self.dimensions}")
        return self

    @property
    def resolved_model_id(self) -> str:
        if self.provider == "bedrock":
            return self.model_id or TITAN_V2_MODEL_ID
        return self.model_id

    @property
    def resolved_dimensions(self) -> int:
        if self.provider == "local":
            return LOCAL_DIMENSIONS
        if self.provider == "local-e5":
            return E5_DIMENSIONS
        return self.dimensions or max(TITAN_V2_DIMENSIONS)


class SizingSettings(BaseModel):
    """The ephemeral storage (MB) of the search functions (search, turns, MCP) and of the indexer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    search_storage_mb: int = Field(default=DEFAULT_EPHEMERAL_STORAGE_MB, gt=0)
    indexer_storage_mb: int = Field(default=DEFAULT_EPHEMERAL_STORAGE_MB, gt=0)


class RerankSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model_id: RerankModelId | None = None  # None: reranking is off


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
    # The normalised origins (`mcp/origins.normalized_origin`) besides the API's own that a browser
    # may call the MCP endpoint from.
    allowed_origins: frozenset[str] = frozenset()
    embedding: EmbeddingSettings = EmbeddingSettings()
    sizing: SizingSettings = SizingSettings()
    rerank: RerankSettings = RerankSettings()

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
EMBEDDING_ENVIRONMENT = {
    "provider": "EMBEDDING_PROVIDER",
    "model_id": "EMBEDDING_MODEL_ID",
    "dimensions": "EMBEDDING_DIMENSIONS",
}
SIZING_ENVIRONMENT = {
    "search_storage_mb": "SEARCH_EPHEMERAL_STORAGE_MB",
    "indexer_storage_mb": "INDEXER_EPHEMERAL_STORAGE_MB",
}
RERANK_VARIABLE = "RERANK_MODEL_ID"


def _set(environ: Mapping[str, str], names: Mapping[str, str]) -> dict[str, str]:
    """The section's fields whose variable is set; an unset or empty variable takes the default."""
    return {field: environ[name] for field, name in names.items() if environ.get(name, "").strip()}


def embedding_settings(environ: Mapping[str, str] = os.environ) -> EmbeddingSettings:
    """The embedding section from `environ` (also read alone: the CLI reads a deployed stack's)."""
    try:
        return EmbeddingSettings.model_validate(_set(environ, EMBEDDING_ENVIRONMENT))
    except ValidationError as exc:
        names = sorted(
            {EMBEDDING_ENVIRONMENT.get(str(error["loc"][0]), "EMBEDDING_*") for error in exc.errors() if error["loc"]}
        )
        detail = "; ".join(error["msg"] for error in exc.errors())
        raise ConfigurationError(f"invalid embedding settings ({', '.join(names) or 'EMBEDDING_*'}): {detail}") from exc


def sizing_settings(environ: Mapping[str, str] = os.environ) -> SizingSettings:
    try:
        return SizingSettings.model_validate(_set(environ, SIZING_ENVIRONMENT))
    except ValidationError as exc:
        names = ", ".join(SIZING_ENVIRONMENT[str(error["loc"][0])] for error in exc.errors() if error["loc"])
        raise ConfigurationError(f"invalid or missing environment variables: {names}") from None


def rerank_settings(environ: Mapping[str, str] = os.environ) -> RerankSettings:
    """Unset or empty `RERANK_MODEL_ID` is off; a model id that is not one of `RERANK_MODELS` is a
    `ConfigurationError` naming the variable and the choices."""
    value = environ.get(RERANK_VARIABLE, "").strip()
    try:
        return RerankSettings(model_id=value or None)  # type: ignore[arg-type]  # validated here
    except ValidationError as exc:
        raise ConfigurationError(
            f"invalid {RERANK_VARIABLE}={value!r}: choose one of {', '.join(RERANK_MODELS)}, or leave it empty"
        ) from exc


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    """Every section from `environ`, each refusal naming the variables it refused."""
    values = {field: environ[var] for field, var in ENVIRONMENT.items() if var in environ}
    sections = {
        "embedding": embedding_settings(environ),
        "sizing": sizing_settings(environ),
        "rerank": rerank_settings(environ),
        "allowed_origins": parse_allowed_origins(environ.get(ALLOWED_ORIGINS_VARIABLE, "")),
    }
    try:
        return Settings.model_validate({**values, **sections})
    except ValidationError as exc:
        missing = ", ".join(ENVIRONMENT[str(e["loc"][0])] for e in exc.errors() if e["loc"])
        raise ConfigurationError(f"invalid or missing environment variables: {missing}") from None


@per_container
def get_settings() -> Settings:
    """This container's settings, read once: only the composition roots call this — the container
    (`runtime/container.py`), which puts them in `Dependencies`, and the local runner and CLI."""
    return load_settings()


def reset_settings() -> None:
    """Forget the cached settings (tests change the environment between cases)."""
    get_settings.reset()
