"""The optional Bedrock reranker (retrieval/rerank.py): the Rerank request it sends, how it reads the
answer, how it fails, and how RERANK_MODEL_ID turns it on. botocore's Stubber checks every request
and response against the bedrock-agent-runtime service model shipped with botocore."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, NoRegionError, ReadTimeoutError
from botocore.stub import Stubber

from agent_knowledge.core.per_container import reset_all
from agent_knowledge.errors import ConfigurationError, RerankFailed
from agent_knowledge.limits import QUERY_MAX_CHARS
from agent_knowledge.retrieval import rerank as rerank_module
from agent_knowledge.retrieval.rerank import (
    ATTEMPTS,
    CONNECT_TIMEOUT_SECONDS,
    MAX_PASSAGE_CHARACTERS,
    MAX_PASSAGES,
    READ_TIMEOUT_SECONDS,
    BedrockReranker,
    make_reranker,
)
from agent_knowledge.settings import RERANK_MODELS, get_settings, rerank_settings
from tests.support.fakes import REQUIRED_ENVIRONMENT

AMAZON = "amazon.rerank-v1:0"
COHERE = "cohere.rerank-v3-5:0"


def agent_runtime(region: str = "us-west-2", attempts: int = 1):
    return botocore.session.get_session().create_client(
        "bedrock-agent-runtime",
        region_name=region,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}),
    )


@pytest.fixture()
def stubbed():
    client = agent_runtime()
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def expected_request(query: str, texts: list[str], number: int, arn: str) -> dict:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}}}
            for text in texts
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {"modelConfiguration": {"modelArn": arn}, "numberOfResults": number},
        },
    }


def answer(*scored: tuple[int, float]) -> dict:
    return {"results": [{"index": index, "relevanceScore": score} for index, score in scored]}


PASSAGES = [
    "flock(2) places an advisory lock on an open file",
    "The annual leave policy grants 25 days",
    "fcntl F_SETLK acquires a record lock on a file",
]


@pytest.mark.parametrize("model", RERANK_MODELS)
def test_one_rerank_call_names_the_model_arn_the_query_and_every_passage_in_order(stubbed, model):
    client, stubber = stubbed
    arn = f"arn:aws:bedrock:us-west-2::foundation-model/{model}"
    stubber.add_response("rerank", answer((2, 0.91), (0, 0.62)), expected_request("lock a file", PASSAGES, 2, arn))
    order = BedrockReranker(lambda: client, model).rerank("lock a file", PASSAGES, top_n=2)
    assert order == [(2, 0.91), (0, 0.62)]


def test_the_model_arn_follows_the_clients_partition_and_region():
    client = agent_runtime(region="cn-north-1")
    with Stubber(client) as stubber:
        arn = "arn:aws-cn:bedrock:cn-north-1::foundation-model/cohere.rerank-v3-5:0"
        stubber.add_response("rerank", answer((0, 0.5)), expected_request("q", ["only passage"], 1, arn))
        assert BedrockReranker(lambda: client, COHERE).rerank("q", ["only passage"], top_n=3) == [(0, 0.5)]


def test_the_answer_is_ordered_best_first_and_cut_to_top_n_whatever_order_it_came_in(stubbed):
    client, stubber = stubbed
    arn = f"arn:aws:bedrock:us-west-2::foundation-model/{AMAZON}"
    stubber.add_response(
        "rerank", answer((1, 0.2), (0, 0.7), (2, 0.7)), expected_request("q", PASSAGES, 2, arn)
    )  # a service that ignored numberOfResults: still at most top_n, ties by passage order
    assert BedrockReranker(lambda: client, AMAZON).rerank("q", PASSAGES, top_n=2) == [(0, 0.7), (2, 0.7)]


def test_fewer_results_than_asked_are_returned_as_they_are(stubbed):
    client, stubber = stubbed
    arn = f"arn:aws:bedrock:us-west-2::foundation-model/{AMAZON}"
    stubber.add_response("rerank", answer((1, 0.33)), expected_request("q", PASSAGES, 3, arn))
    assert BedrockReranker(lambda: client, AMAZON).rerank("q", PASSAGES, top_n=3) == [(1, 0.33)]


def test_top_n_above_the_passages_asks_for_all_of_them(stubbed):
    client, stubber = stubbed
    arn = f"arn:aws:bedrock:us-west-2::foundation-model/{AMAZON}"
    stubber.add_response("rerank", answer((0, 0.1), (1, 0.9)), expected_request("q", PASSAGES[:2], 2, arn))
    assert BedrockReranker(lambda: client, AMAZON).rerank("q", PASSAGES[:2], top_n=3) == [(1, 0.9), (0, 0.1)]


def test_blank_passages_are_not_sent_and_indexes_still_point_into_what_the_caller_passed(stubbed):
    client, stubber = stubbed
    arn = f"arn:aws:bedrock:us-west-2::foundation-model/{COHERE}"
    passages = ["", PASSAGES[0], "   ", PASSAGES[2]]
    # The Rerank API refuses an empty text; the two real passages go as sources 0 and 1.
    stubber.add_response(
        "rerank", answer((1, 0.8), (0, 0.4)), expected_request("q", [PASSAGES[0], PASSAGES[2]], 2, arn)
    )
    assert BedrockReranker(lambda: client, COHERE).rerank("q", passages, top_n=3) == [(3, 0.8), (1, 0.4)]


def test_long_passages_and_queries_are_cut_to_what_one_billed_query_carries(stubbed):
    client, stubber = stubbed
    arn = f"arn:aws:bedrock:us-west-2::foundation-model/{COHERE}"
    long_passage = "lock " * 1_000  # 5,000 characters
    long_query = "q" * (QUERY_MAX_CHARS + 500)
    stubber.add_response(
        "rerank",
        answer((0, 0.6)),
        expected_request(long_query[:QUERY_MAX_CHARS], [long_passage[:MAX_PASSAGE_CHARACTERS]], 1, arn),
    )
    assert BedrockReranker(lambda: client, COHERE).rerank(long_query, [long_passage], top_n=1) == [(0, 0.6)]


@pytest.mark.parametrize("passages", [[], [""], ["  ", "\n"]])
def test_nothing_to_rerank_makes_no_call(stubbed, passages):
    client, _ = stubbed  # no response queued: a call would fail the test with UnStubbedResponseError
    assert BedrockReranker(lambda: client, AMAZON).rerank("q", passages, top_n=3) == []


def test_nothing_to_rerank_does_not_even_create_the_client():
    def no_client():
        raise AssertionError("the client was created")

    assert BedrockReranker(no_client, AMAZON).rerank("q", [], top_n=3) == []


@pytest.mark.parametrize(
    "code, transient",
    [
        ("ThrottlingException", True),
        ("ServiceQuotaExceededException", True),
        ("InternalServerException", True),
        ("BadGatewayException", True),
        ("DependencyFailedException", True),
        ("AccessDeniedException", False),  # model not enabled in the account, or no IAM grant
        ("ValidationException", False),
        ("ResourceNotFoundException", False),  # the model is not offered in this region
    ],
)
def test_service_errors_raise_rerank_failed_with_the_code_and_whether_a_retry_may_help(stubbed, code, transient):
    client, stubber = stubbed
    stubber.add_client_error("rerank", service_error_code=code, http_status_code=400)
    with pytest.raises(RerankFailed) as caught:
        BedrockReranker(lambda: client, COHERE).rerank("q", PASSAGES, top_n=3)
    assert caught.value.context() == {"model_id": COHERE, "error_code": code, "transient": transient}
    assert code in caught.value.message


@pytest.mark.parametrize(
    "error",
    [
        ReadTimeoutError(endpoint_url="https://bedrock-agent-runtime.us-west-2.amazonaws.com/rerank"),
        ConnectTimeoutError(endpoint_url="https://bedrock-agent-runtime.us-west-2.amazonaws.com/rerank"),
        EndpointConnectionError(endpoint_url="https://bedrock-agent-runtime.us-west-2.amazonaws.com/rerank"),
    ],
)
def test_timeouts_and_unreachable_endpoints_are_retried_once_then_raise_a_transient_rerank_failed(error, monkeypatch):
    """Raised where botocore's HTTP layer raises them (before-send), through its retry handling."""
    client = agent_runtime(attempts=ATTEMPTS)
    sent: list[str] = []
    waits: list[float] = []

    def fail(request, **_):
        sent.append(request.url)
        raise error

    client.meta.events.register("before-send.bedrock-agent-runtime.Rerank", fail)
    monkeypatch.setattr("botocore.endpoint.time.sleep", waits.append)  # botocore's backoff, not slept here
    with pytest.raises(RerankFailed) as caught:
        BedrockReranker(lambda: client, AMAZON).rerank("q", PASSAGES, top_n=3)
    assert caught.value.transient is True and caught.value.error_code == type(error).__name__
    assert sent == ["https://bedrock-agent-runtime.us-west-2.amazonaws.com/rerank"] * ATTEMPTS
    assert len(waits) == ATTEMPTS - 1


def test_a_client_that_cannot_be_created_raises_a_non_transient_rerank_failed():
    def no_region():
        raise NoRegionError()

    with pytest.raises(RerankFailed) as caught:
        BedrockReranker(no_region, AMAZON).rerank("q", PASSAGES, top_n=3)
    assert caught.value.context() == {"model_id": AMAZON, "error_code": "NoRegionError", "transient": False}


@pytest.mark.parametrize(
    "results, what",
    [
        ([{"index": 3, "relevanceScore": 0.5}], "outside the 3 passages"),
        ([{"index": 0, "relevanceScore": 0.5}, {"index": 0, "relevanceScore": 0.4}], "scored twice"),
    ],
)
def test_an_answer_that_does_not_fit_the_request_is_a_non_transient_failure(stubbed, results, what):
    client, stubber = stubbed
    stubber.add_response("rerank", {"results": results})
    with pytest.raises(RerankFailed, match=what) as caught:
        BedrockReranker(lambda: client, AMAZON).rerank("q", PASSAGES, top_n=3)
    assert caught.value.error_code == "UnexpectedResponse" and caught.value.transient is False


@pytest.mark.parametrize(
    "response", [{}, {"results": None}, {"results": [{"index": 0, "relevanceScore": float("nan")}]}]
)
def test_a_malformed_answer_is_a_non_transient_failure(response):
    class Client:  # what the Stubber's response validation would refuse, as a broken proxy might send it
        def rerank(self, **_):
            return response

        class meta:  # noqa: N801 - the attribute botocore clients have
            partition = "aws"
            region_name = "us-west-2"

    with pytest.raises(RerankFailed) as caught:
        BedrockReranker(Client, AMAZON).rerank("q", PASSAGES, top_n=3)
    assert caught.value.error_code == "UnexpectedResponse"


@pytest.mark.parametrize(
    "query, passages, top_n, message",
    [
        ("q", PASSAGES, 0, "top_n must be at least 1"),
        ("q", ["p"] * (MAX_PASSAGES + 1), 3, f"at most {MAX_PASSAGES} passages"),
        ("  ", PASSAGES, 3, "empty query"),
    ],
)
def test_arguments_outside_the_contract_are_a_value_error(query, passages, top_n, message):
    with pytest.raises(ValueError, match=message):
        BedrockReranker(lambda: None, AMAZON).rerank(query, passages, top_n=top_n)


# -- RERANK_MODEL_ID ---------------------------------------------------------------------------


@pytest.mark.parametrize("environ", [{}, {"RERANK_MODEL_ID": ""}, {"RERANK_MODEL_ID": "  "}])
def test_unset_or_empty_means_no_reranker(environ):
    settings = rerank_settings(environ)
    assert settings.model_id is None and make_reranker(settings) is None


@pytest.mark.parametrize("model", RERANK_MODELS)
def test_each_supported_model_makes_a_bedrock_reranker(model):
    reranker = make_reranker(rerank_settings({"RERANK_MODEL_ID": model}), client=lambda: None)
    assert isinstance(reranker, BedrockReranker) and reranker.model_id == model


@pytest.mark.parametrize("value", ["cohere.rerank-v3:0", "amazon.titan-embed-text-v2:0", "AMAZON.RERANK-V1:0"])
def test_an_unknown_model_is_a_configuration_error_naming_the_variable_and_the_choices(value):
    with pytest.raises(ConfigurationError, match="RERANK_MODEL_ID") as caught:
        rerank_settings({"RERANK_MODEL_ID": value})
    assert all(model in caught.value.message for model in RERANK_MODELS)


def test_the_container_reads_the_environment_once(monkeypatch):
    from agent_knowledge.dependencies import Dependencies

    for name, value in {**REQUIRED_ENVIRONMENT, "RERANK_MODEL_ID": COHERE}.items():
        monkeypatch.setenv(name, value)
    reset_all()
    try:
        deps = Dependencies(repositories=None, settings=get_settings())
        first = deps.reranker()
        monkeypatch.setenv("RERANK_MODEL_ID", "")
        assert deps.reranker() is first and first is not None and first.model_id == COHERE
        assert get_settings().rerank.model_id == COHERE  # the settings too are read once
        reset_all()  # a new container
        assert Dependencies(repositories=None, settings=get_settings()).reranker() is None
    finally:
        reset_all()


def test_the_default_client_is_created_once_with_the_short_budget(monkeypatch):
    from agent_knowledge.repositories import aws

    monkeypatch.setenv("AWS_REGION", "us-west-2")
    # A session of its own: the container's one outlives reset_all(), and one made before moto is
    # imported would send a later moto test's calls to AWS.
    monkeypatch.setattr(aws, "_session", None)
    reset_all()
    try:
        client = rerank_module._rerank_client()
        assert rerank_module._rerank_client() is client
        config = client.meta.config
        assert (config.connect_timeout, config.read_timeout) == (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)
        assert config.retries == {"mode": "standard", "total_max_attempts": ATTEMPTS}
        assert client.meta.service_model.service_name == "bedrock-agent-runtime"
    finally:
        reset_all()
