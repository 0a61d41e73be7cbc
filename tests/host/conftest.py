from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.host.fakes import FakeApi, running


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with running(FakeApi()) as fake:
        yield fake
