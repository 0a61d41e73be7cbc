"""Per-container values (`core/per_container`): built once, per key for a keyed factory, forgotten
by `reset_all` as a new container would."""

from agent_knowledge.core.per_container import per_container_by_key, reset_all


def test_a_keyed_value_is_built_once_per_key_and_rebuilt_after_a_reset():
    built: list[str] = []

    @per_container_by_key
    def codec(secret_id: str) -> str:
        built.append(secret_id)
        return f"codec of {secret_id}"

    assert codec("a") == "codec of a" and codec("a") == "codec of a"
    assert codec("b") == "codec of b"
    assert built == ["a", "b"]
    reset_all()
    assert codec("a") == "codec of a"
    assert built == ["a", "b", "a"]


def test_a_failed_build_is_not_kept():
    calls = []

    @per_container_by_key
    def flaky(key: int) -> int:
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("secret unreadable")
        return key * 2

    try:
        flaky(3)
    except RuntimeError:
        pass
    assert flaky(3) == 6
    assert calls == [3, 3]
