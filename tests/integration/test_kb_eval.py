"""`agent-knowledge kb eval` against a local stack (the CLI in-process, as tests/integration/test_cli.py
runs it): the three modes' figures, the questions each misses, and clear errors for bad input."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.test_cli import _restore_environment, run, running_stack  # noqa: F401 (fixtures)

PAGES = {
    "password.md": "# Password recovery\n\nIf you no longer know your password, open the account page and choose "
    "Reset. We e-mail a link that lets you pick a new one within an hour.",
    "tyre.md": "# Changing a flat tyre\n\nLoosen the wheel nuts, raise the car with the jack, swap the punctured "
    "wheel for the spare, then tighten the nuts in a star pattern.",
    "bread.md": "# Baking bread\n\nMix flour, water, yeast and salt, knead the dough for ten minutes, let it rise "
    "until doubled and bake at 220 degrees.",
    "config.md": "# Proxy settings\n\nSet HTTPS_PROXY_TIMEOUT_MS to change how long the agent waits for the proxy.",
}


@pytest.fixture(scope="module")
def evaluated_kb(running_stack, tmp_path_factory) -> str:  # noqa: F811
    from agent_knowledge_dev import cli

    folder = tmp_path_factory.mktemp("eval-pages")
    for name, text in PAGES.items():
        (folder / name).write_text(text, encoding="utf-8")
    assert cli.main(["kb", "create", "evalkb"]) == 0
    assert cli.main(["doc", "put", "evalkb", "--dir", str(folder), "--wait", "--timeout", "120"]) == 0
    return "evalkb"


def _questions(tmp_path, *entries) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n", encoding="utf-8")
    return str(path)


def test_kb_eval_reports_each_mode_and_the_questions_it_missed(run, evaluated_kb, tmp_path):  # noqa: F811
    questions = _questions(
        tmp_path,
        {"query": "knead the dough", "expected": ["bread.md"]},
        {"query": "HTTPS_PROXY_TIMEOUT_MS", "expected": ["evalkb/config.md"]},
        {"query": "spare wheel", "expected": ["Changing a flat tyre"]},
        {"query": "quantum chromodynamics lattice", "expected": ["password.md"]},
    )
    result = run("kb", "eval", evaluated_kb, "--questions", questions, "--json")
    assert result.status == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["kb_id"] == evaluated_kb and report["questions"] == 4
    lexical = report["modes"]["lexical"]
    # Three found first (by source key, prefixed key and title); the last matches nothing at all.
    assert (lexical["mrr_at_3"], lexical["recall_at_3"], lexical["hit_at_1"]) == (0.75, 0.75, 0.75)
    assert lexical["missed"] == [{"query": "quantum chromodynamics lattice", "answered": []}]
    assert set(report["modes"]) == {"lexical", "dense", "hybrid"}
    for mode in ("dense", "hybrid"):
        summary = report["modes"][mode]
        if summary["available"]:  # the vectors may not be published yet when the lexical side is
            assert 0.0 <= summary["mrr_at_3"] <= summary["recall_at_3"] <= 1.0
        else:
            assert "vectors" in summary["reason"] or "embedding" in summary["reason"]

    text = run("kb", "eval", evaluated_kb, "--questions", questions)
    assert text.status == 0 and "lexical" in text.stdout and "quantum chromodynamics lattice" in text.stdout


def test_kb_eval_measures_dense_and_hybrid_once_the_vectors_are_there(run, evaluated_kb, tmp_path):  # noqa: F811
    questions = _questions(tmp_path, {"query": "how do I bake a loaf", "expected": ["bread.md"]})
    deadline = time.monotonic() + 120
    while True:
        report = json.loads(run("kb", "eval", evaluated_kb, "--questions", questions, "--json").stdout)
        if report["modes"]["hybrid"]["available"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    hybrid, dense = report["modes"]["hybrid"], report["modes"]["dense"]
    assert hybrid["available"] and dense["available"], report
    assert report["embedding_model"]
    assert dense["recall_at_3"] == 1.0 and hybrid["recall_at_3"] == 1.0


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["not json"], "questions.jsonl:1: not JSON"),
        (['{"query": "x"}'], 'questions.jsonl:1: "expected" must be a non-empty list'),
        (['{"query": "", "expected": ["a"]}'], 'questions.jsonl:1: "query" must be a non-empty string'),
        (['{"query": "x", "expected": ["a"], "k": 3}'], 'questions.jsonl:1: expected an object with "query"'),
        (["", "   "], "holds no question"),
    ],
)
def test_kb_eval_refuses_a_bad_questions_file_with_its_line(run, evaluated_kb, tmp_path, lines, message):  # noqa: F811
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("kb", "eval", evaluated_kb, "--questions", str(path))
    assert result.status == 1 and message in result.stderr and result.stdout == ""


def test_kb_eval_names_a_missing_file_and_an_unknown_kb(run, evaluated_kb, tmp_path):  # noqa: F811
    missing = run("kb", "eval", evaluated_kb, "--questions", str(tmp_path / "none.jsonl"))
    assert missing.status == 1 and "cannot read" in missing.stderr
    questions = _questions(tmp_path, {"query": "x", "expected": ["a"]})
    unknown = run("kb", "eval", "no-such-kb", "--questions", questions)
    assert unknown.status == 1 and "no-such-kb" in unknown.stderr
