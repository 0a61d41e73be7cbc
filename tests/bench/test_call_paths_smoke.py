"""The call-path counter (`bench/call_paths.py`, issue 37) on its small stack: both paths run end to
end and the counts say what the benchmark says they do. No figure is asserted (bench/README.md has
them): a restructuring changes them on purpose."""

from __future__ import annotations

from bench import call_paths


def test_both_paths_are_counted_through_the_project_modules():
    counts = call_paths.measure()
    assert set(counts) == set(call_paths.PATHS)
    for path in counts.values():
        assert path.module_calls > 0 and path.function_calls >= path.module_calls and path.entries > 0
        # Every call into another module returns to it (a yield or an exception is a return too).
        assert path.module_returns == path.module_calls
        assert sum(path.entered_from_other_modules.values()) == path.module_calls
    search = counts["search"].modules
    assert "functions.search.app" in search and "agent_knowledge.knowledge.search" in search
    change = counts["document_change"].modules
    assert "functions.ingest.app" in change and "functions.indexer.app" in change


def test_a_call_into_another_module_is_counted_once_each_way():
    path = call_paths.count(
        [
            call_paths.Event(1, "call", "functions.search.app", None, "lambda_handler", True),
            call_paths.Event(1, "call", "agent_knowledge.knowledge.search", "functions.search.app", "search", True),
            call_paths.Event(
                1, "call", "agent_knowledge.knowledge.search", "agent_knowledge.knowledge.search", "<listcomp>", True
            ),
            call_paths.Event(
                1, "return", "agent_knowledge.knowledge.search", "agent_knowledge.knowledge.search", "<listcomp>", True
            ),
            call_paths.Event(1, "return", "agent_knowledge.knowledge.search", "functions.search.app", "search", True),
            call_paths.Event(1, "return", "functions.search.app", None, "lambda_handler", True),
        ]
    )
    assert (len(path.modules), path.module_calls, path.module_returns) == (2, 1, 1)
    assert (path.function_calls, path.entries) == (2, 1)  # not the comprehension
    assert [line.split("  (")[0] for line in path.sequence] == [
        "functions.search.app:lambda_handler",
        "  agent_knowledge.knowledge.search:search",
    ]
