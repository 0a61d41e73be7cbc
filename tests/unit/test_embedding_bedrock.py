"""Titan Text Embeddings v2 through bedrock-runtime (embedding/bedrock.py), with botocore's Stubber and
the recorded response shape {"embedding": [...], "inputTextTokenCount": n}."""

from __future__ import annotations

import io
import json

import botocore.session
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from agent_knowledge.embedding.bedrock import BedrockEmbedder
from agent_knowledge.errors import EmbeddingFailed

MODEL = "amazon.titan-embed-text-v2:0"


@pytest.fixture()
def stubbed():
    client = botocore.session.get_session().create_client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def response(values: list[float], tokens: int = 7) -> dict:
    data = json.dumps({"embedding": values, "inputTextTokenCount": tokens}).encode()
    return {"body": StreamingBody(io.BytesIO(data), len(data)), "contentType": "application/json"}


def request(text: str, dimensions: int = 4) -> dict:
    body = json.dumps({"inputText": text, "dimensions": dimensions, "normalize": True})
    return {"modelId": MODEL, "body": body, "contentType": "application/json", "accept": "application/json"}


def embedder(client, **options) -> BedrockEmbedder:
    delays: list[float] = []
    made = BedrockEmbedder(lambda: client, MODEL, 4, sleep=delays.append, jitter=lambda: 1.0, **options)
    made.delays = delays  # type: ignore[attr-defined]
    return made


def test_a_query_is_one_call_with_the_configured_model_and_dimensions(stubbed):
    client, stubber = stubbed
    stubber.add_response("invoke_model", response([3.0, 0.0, 4.0, 0.0]), request("how to lock a file"))
    vector = embedder(client).embed_query("how to lock a file")
    assert vector.dtype == np.float32 and vector.tolist() == pytest.approx([0.6, 0.0, 0.8, 0.0])


def test_documents_are_embedded_one_call_each_in_order(stubbed):
    client, stubber = stubbed
    for n, text in enumerate(["alpha", "beta", "gamma"]):
        stubber.add_response("invoke_model", response([1.0, float(n), 0.0, 0.0]), request(text))
    vectors = embedder(client, max_concurrency=1).embed_documents(["alpha", "beta", "gamma"])
    assert vectors.shape == (3, 4)
    assert np.argmax(vectors[2]) == 1 and vectors[0].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_throttling_is_retried_with_growing_back_off(stubbed):
    client, stubber = stubbed
    stubber.add_client_error("invoke_model", "ThrottlingException", http_status_code=429, expected_params=None)
    stubber.add_client_error("invoke_model", "ServiceUnavailableException", http_status_code=503, expected_params=None)
    stubber.add_response("invoke_model", response([0.0, 1.0, 0.0, 0.0]), request("retry me"))
    made = embedder(client)
    assert made.embed_query("retry me").tolist() == [0.0, 1.0, 0.0, 0.0]
    assert made.delays == [0.2, 0.4]  # type: ignore[attr-defined]


def test_throttling_past_the_last_attempt_fails_as_transient(stubbed):
    client, stubber = stubbed
    for _ in range(3):
        stubber.add_client_error("invoke_model", "ThrottlingException", http_status_code=429, expected_params=None)
    with pytest.raises(EmbeddingFailed) as raised:
        embedder(client, attempts=3).embed_query("too busy")
    assert raised.value.context() == {
        "provider": "bedrock", "model_id": MODEL, "error_code": "ThrottlingException", "transient": True,
    }  # fmt: skip


def test_an_error_no_retry_fixes_fails_at_once_as_not_transient(stubbed):
    client, stubber = stubbed
    stubber.add_client_error("invoke_model", "AccessDeniedException", http_status_code=403, expected_params=None)
    with pytest.raises(EmbeddingFailed, match="refused: AccessDeniedException") as raised:
        embedder(client).embed_query("not allowed")
    assert raised.value.transient is False


def test_a_vector_of_the_wrong_length_is_refused(stubbed):
    client, stubber = stubbed
    stubber.add_response("invoke_model", response([1.0, 2.0]), request("short"))
    with pytest.raises(EmbeddingFailed, match="returned 2 values, expected 4"):
        embedder(client).embed_query("short")


def test_empty_text_is_refused_before_any_call(stubbed):
    client, _ = stubbed
    with pytest.raises(ValueError, match="empty"):
        embedder(client).embed_query("   ")
