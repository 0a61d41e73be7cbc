"""The versions an index generation is written in, readable without loading the search engine (the
reconciler checks them after an upgrade; docs/DESIGN.md §10)."""

from __future__ import annotations

import functools
from importlib import metadata
from typing import Any

# Version of the index's contents: the schema (`index_format/schema.py`), its analyzers and the
# tokenization in `index_format/analyzer.py`. Bump it with any change to them: every manifest records it,
# readers refuse another version (that source fails, docs/DESIGN.md §10) and the next update of
# each KB — or the reconciler's next run — rebuilds its index in full.
# 2: revision and digest stored only, as bytes; 3: identifiers indexed whole; 4: access terms;
# 5: chunk texts out of tantivy, in a text file per segment (`index_format/chunk_text`)
SCHEMA_VERSION = 5

# Version of the manifest format (`index_format/layout.py`), independent of tantivy's and the schema's.
# 2: `index_bytes`, each file's `role`, kind `compaction`.
FORMAT_VERSION = 2


@functools.cache
def tantivy_version() -> str:
    """The tantivy (tantivy-py) version installed with this code; the one pin is in pyproject.toml
    and shared/requirements.txt (tests/unit/test_index_layout.py checks they agree)."""
    return metadata.version("tantivy")


def versions_of(manifest: dict[str, Any]) -> tuple[Any, Any, Any]:
    return (manifest.get("format_version"), manifest.get("schema_version"), manifest.get("tantivy_version"))


def current_versions() -> tuple[int, int, str]:
    return (FORMAT_VERSION, SCHEMA_VERSION, tantivy_version())
