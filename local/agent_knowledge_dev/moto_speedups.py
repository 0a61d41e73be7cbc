"""Speed-ups for the local moto stack, installed by `serve` and `invoke` only (never in the layer).

Each removes repeated work from moto's per-request path without changing any answer; bulk ingest
makes thousands of requests, so they decide whether it takes one minute or two.

1. DynamoDB responses: moto (5.1+) serializes every response member by member through the botocore shape model, which
costs ~50 µs per attribute: a Query returning a few hundred document records (each with lists of
chunk digests and offsets) takes seconds, long enough to trip the functions' 4 s read timeout,
and bulk ingest spends most of its time there. DynamoDB `AttributeValue`s reach the serializer
already in wire form (`{"S": "..."}`, `{"L": [...]}`, ...), so when one holds only JSON-native
types (no binary, which would need base64) it is emitted as is. Results are identical
(tests/integration/test_cli.py checks it against moto's own path); only the time changes.
2. moto's server lists its own package directory (`os.listdir` + a `stat` per entry) on every
   request to route it; the list cannot change while the process runs, so it is computed once.
3. moto looks up a response class's method names with `inspect.getmembers` on every request; they
   are fixed per class, so they are cached per class.
4. DynamoDB requests: moto (5.2) parses every request member by member through the shape model
   too, visiting the ten members of `AttributeValue` for each value of an item (a document record
   carries lists of hundreds of chunk digests, written twice per document). A value in wire form
   without binary parses to itself (binary members are base64-decoded, so those keep moto's path):
   it is taken as is.
"""

from __future__ import annotations

import functools
from typing import Any

from agent_knowledge_dev.moto_pin import require_pinned_moto

_SCALARS = {"S": str, "N": str, "BOOL": bool, "NULL": bool}
_original: Any = None
_original_parse: Any = None
_patched: dict[tuple[Any, str], Any] = {}


def _wire_form(value: Any) -> bool:
    """True for an AttributeValue dict made only of JSON-native members (recursively)."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((kind, member),) = value.items()
    if kind in _SCALARS:
        return isinstance(member, _SCALARS[kind])
    if kind in {"SS", "NS"}:
        return isinstance(member, list) and all(isinstance(item, str) for item in member)
    if kind == "L":
        return isinstance(member, list) and all(_wire_form(item) for item in member)
    if kind == "M":
        return isinstance(member, dict) and all(
            isinstance(name, str) and _wire_form(item) for name, item in member.items()
        )
    return False


def _replace(owner: Any, name: str, replacement: Any) -> None:
    _patched[(owner, name)] = getattr(owner, name)
    setattr(owner, name, replacement)


def install() -> None:
    require_pinned_moto()
    global _original, _original_parse
    from moto import backends
    from moto.core import responses
    from moto.core.parse import BaseJSONParser
    from moto.core.serialize import JSONSerializer

    if _original is not None:
        return
    _original = JSONSerializer._serialize_type_structure
    modules = tuple(backends.list_of_moto_modules())
    _replace(backends, "list_of_moto_modules", lambda: modules)
    _replace(responses, "method_names_from_class", functools.cache(responses.method_names_from_class))

    def serialize_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue" and _wire_form(value):
            self._default_serialize(serialized, value, shape, key)
            return
        _original(self, serialized, value, shape, key)

    JSONSerializer._serialize_type_structure = serialize_structure  # type: ignore[method-assign]

    _original_parse = BaseJSONParser._parse_structure

    def parse_structure(self: Any, shape: Any, value: Any) -> Any:
        if shape.name == "AttributeValue" and self.MAP_TYPE is dict and _wire_form(value):
            return value
        return _original_parse(self, shape, value)

    BaseJSONParser._parse_structure = parse_structure  # type: ignore[method-assign]


def uninstall() -> None:
    global _original, _original_parse
    from moto.core.parse import BaseJSONParser
    from moto.core.serialize import JSONSerializer

    if _original is not None:
        JSONSerializer._serialize_type_structure = _original  # type: ignore[method-assign]
        _original = None
    if _original_parse is not None:
        BaseJSONParser._parse_structure = _original_parse  # type: ignore[method-assign]
        _original_parse = None
    for (owner, name), original in _patched.items():
        setattr(owner, name, original)
    _patched.clear()
