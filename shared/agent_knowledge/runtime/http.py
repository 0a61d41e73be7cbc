"""HTTP surface shared by every function (docs/DESIGN.md §7).

- every response carries `Cache-Control: no-store` and `Content-Type: application/json`,
  added to the final result of `app.resolve()` because middleware-added headers do not reach
  responses produced by exception handlers;
- errors are `{"error", "message"}`; domain errors are mapped to statuses in one place;
- bad bodies (non-JSON, not an object, unknown fields, wrong types, over 64 KiB, and what strict
  JSON refuses: duplicate keys, NaN/Infinity, lone surrogates, nesting past 32 levels — see
  `agent_knowledge.wire`) are `400 invalid_request`, never Powertools' 422;
- anything unexpected is logged with the request id and answered 500 without details;
- a 401 carries `WWW-Authenticate: Bearer realm="agent-api"`, or in OAuth mode
  `Bearer resource_metadata="…"` (`identity.oauth.challenge`).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver, Response
from pydantic import BaseModel, ValidationError

from agent_knowledge import errors, wire
from agent_knowledge.core.observability import logger
from agent_knowledge.limits import REQUEST_MAX_BODY_BYTES
from agent_knowledge.models import ParsedBody

if TYPE_CHECKING:
    from agent_knowledge.dependencies import Dependencies
    from agent_knowledge.settings import Settings

JSON = "application/json"

STATUS_BY_ERROR: dict[type[errors.KnowledgeError], int] = {
    errors.InvalidRequest: 400,
    errors.Unauthorized: 401,
    errors.WorkspaceNotFound: 404,
    errors.RunNotFound: 404,
    errors.RunNotReady: 409,
    errors.TaskNotActive: 409,
    errors.TurnConflict: 409,
    errors.ReferenceInvalid: 400,
    errors.ReferenceExpired: 410,
    errors.ScopeChanged: 409,
    errors.KnowledgeChanged: 409,
    errors.KnowledgeUnavailable: 503,
}

ModelT = TypeVar("ModelT", bound=BaseModel)


def status_of(error: errors.KnowledgeError) -> int:
    for error_type in type(error).__mro__:
        if error_type in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[error_type]
    return 500


def json_response(status: int, body: BaseModel | dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=status, content_type=JSON, body=wire.dumps(body), headers=headers)


def error_response(status: int, code: str, message: str) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="agent-api"'} if status == 401 else None
    return json_response(status, {"error": code, "message": message}, headers)


# A field name a message may repeat: what a client could have meant as a field, never arbitrary
# request content (anything else is "an unknown field", unnamed).
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _field_message(model: type[BaseModel], error: Any) -> str:
    """A short message naming the offending field, without echoing request content (an unknown
    field is named only when its name looks like one: `_FIELD_NAME`)."""
    location = [str(part) for part in error.get("loc", ())]
    if error.get("type") == "extra_forbidden":
        allowed = ", ".join(model.model_fields)
        path = ".".join(location)
        named = (
            f"unknown field {path!r}"
            if location and all(_FIELD_NAME.fullmatch(p) for p in location)
            else "unknown field"
        )
        return f"{named}; allowed fields are: {allowed}"
    field = ".".join(location) if location else "body"
    if field.split(".")[0] not in model.model_fields:
        field = "body"
    # Our validators raise ValueError("must not be empty"); pydantic prefixes "Value error, ".
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    return f"{field}: {message}"


def raw_body(event: dict[str, Any], max_bytes: int = REQUEST_MAX_BODY_BYTES) -> bytes:
    body = event.get("body")
    if body is None:
        return b""
    if event.get("isBase64Encoded"):
        # Cheap bound before decoding: base64 inflates by 4/3.
        if len(body) > (max_bytes * 4) // 3 + 4:
            raise errors.InvalidRequest(f"request body is larger than {max_bytes // 1024} KiB")
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise errors.InvalidRequest("request body is not valid base64") from None
    return body.encode("utf-8", "surrogatepass")


def parse_body(event: dict[str, Any], model: type[ModelT], max_bytes: int = REQUEST_MAX_BODY_BYTES) -> ModelT:
    data = raw_body(event, max_bytes)
    if len(data) > max_bytes:
        raise errors.InvalidRequest(f"request body is larger than {max_bytes // 1024} KiB")
    if not data.strip():
        raise errors.InvalidRequest("request body must be a JSON object")
    try:
        document = wire.loads(data.decode("utf-8"))
    except wire.JsonRejected as exc:
        raise errors.InvalidRequest(str(exc)) from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise errors.InvalidRequest("request body is not valid UTF-8 JSON") from None
    if not isinstance(document, dict):
        raise errors.InvalidRequest("request body must be a JSON object")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise errors.InvalidRequest(_field_message(model, exc.errors()[0])) from None


def parse_body_later(
    event: dict[str, Any], model: type[ModelT], max_bytes: int = REQUEST_MAX_BODY_BYTES
) -> ParsedBody[ModelT]:
    """`parse_body`, its error kept for later (see `models.ParsedBody`)."""
    try:
        return ParsedBody(parse_body(event, model, max_bytes), None)
    except errors.InvalidRequest as error:
        return ParsedBody(None, error)


def register_error_handlers(app: APIGatewayHttpResolver) -> None:
    @app.exception_handler(errors.KnowledgeError)
    def _domain_error(error: errors.KnowledgeError) -> Response:
        status = status_of(error)
        # context() carries what the caller is not told, e.g. ReferenceInvalid's reason.
        extra = {"error_code": error.code, "status": status, **error.context()}
        if status >= 500:
            logger.warning("request failed", extra=extra)
        else:
            logger.info("request refused", extra=extra)
        return error_response(status, error.code, error.message)

    @app.not_found
    def _not_found(_: Exception) -> Response:
        return error_response(404, "not_found", "no such endpoint")

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response:
        return internal_error(app.lambda_context)


def internal_error(context: Any) -> Response:
    request_id = getattr(context, "aws_request_id", "unknown")
    logger.exception("unhandled error", extra={"request_id": request_id})
    return error_response(500, "internal_error", f"internal error (request id {request_id})")


def create_app() -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver()
    register_error_handlers(app)
    return app


def _with_required_headers(result: dict[str, Any], event: dict[str, Any], settings: Settings) -> dict[str, Any]:
    headers = result.setdefault("headers", {})
    headers["Cache-Control"] = "no-store"
    if result.get("statusCode") == 401:
        # OAuth mode: where the route's protected-resource metadata is (RFC 9728 §5.1), for every
        # 401, whichever handler produced it; bearer-token mode keeps `error_response`'s header.
        from agent_knowledge.identity.oauth import challenge

        found = challenge(event, settings)
        if found is not None:
            for name in [name for name in headers if name.lower() == "www-authenticate"]:
                del headers[name]
            headers["WWW-Authenticate"] = found
    headers.setdefault("Content-Type", JSON)
    # Powertools also emits multiValueHeaders for some payload formats; keep them consistent.
    if "multiValueHeaders" in result and result["multiValueHeaders"] is not None:
        result["multiValueHeaders"]["Cache-Control"] = ["no-store"]
    return result


def resolve(app: APIGatewayHttpResolver, event: dict[str, Any], context: Any, deps: Dependencies) -> dict[str, Any]:
    """Resolve one event with the container's `deps` (the routes find them in `app.context`);
    whatever happens, the result carries the required headers."""
    try:
        app.append_context(deps=deps)
        result = app.resolve(event, context)
    except Exception:  # the resolver itself failed (e.g. an event it cannot parse)
        response = internal_error(context)
        result = {
            "statusCode": response.status_code,
            "headers": {"Content-Type": JSON},
            "body": response.body,
            "isBase64Encoded": False,
        }
    finally:
        app.clear_context()
    return _with_required_headers(result, event if isinstance(event, dict) else {}, deps.settings)
