"""Which embedding provider a stack uses, from environment variables read once per container.

EMBEDDING_PROVIDER     local | local-e5 | bedrock | none (lexical only; the default when unset — the
                       template sets bedrock, `make serve` and the tests local; local-e5 is
                       multilingual-e5-small, opt-in and local only: embedding/e5.py)
EMBEDDING_MODEL_ID     bedrock: the model id (default Titan Text Embeddings v2); local, local-e5:
                       must be empty or the bundled model's id
EMBEDDING_DIMENSIONS   bedrock: 256, 512 or 1024 (Titan v2's choices; default 1024); local: 512;
                       local-e5: 384
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from agent_knowledge.errors import ConfigurationError

Provider = Literal["local", "local-e5", "bedrock", "none"]

TITAN_V2_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
LOCAL_DIMENSIONS = 512
E5_DIMENSIONS = 384

ENVIRONMENT = {
    "provider": "EMBEDDING_PROVIDER",
    "model_id": "EMBEDDING_MODEL_ID",
    "dimensions": "EMBEDDING_DIMENSIONS",
}


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


def embedding_settings(environ: Mapping[str, str] = os.environ) -> EmbeddingSettings:
    """The settings from `environ`; an unset or empty variable takes the default."""
    values = {field: environ[name] for field, name in ENVIRONMENT.items() if environ.get(name, "").strip()}
    try:
        return EmbeddingSettings.model_validate(values)
    except ValidationError as exc:
        names = sorted({ENVIRONMENT.get(str(error["loc"][0]), "EMBEDDING_*") for error in exc.errors() if error["loc"]})
        detail = "; ".join(error["msg"] for error in exc.errors())
        raise ConfigurationError(f"invalid embedding settings ({', '.join(names) or 'EMBEDDING_*'}): {detail}") from exc
