"""The console as the tests drive it: Starlette's TestClient on the application `memfile serve` builds
(tests/console, and the console's words in tests/faces/test_face_words.py). The `console` fixture is in
tests/conftest.py.

(Not a test module: pytest collects no test here.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from starlette.testclient import TestClient

from helpers.serve import Setup
from memfile.model import Source
from memfile.worker import Caller, Minds

ORIGIN = "http://localhost"
SAME = {"Origin": ORIGIN}
#: The console's mind in `console`: michael, the default of helpers.serve.make_setup's vault.
MIND = "michael"


@dataclass
class Console:
    setup: Setup
    minds: Minds
    app: Any

    def client(self) -> TestClient:
        return TestClient(self.app, base_url=ORIGIN, follow_redirects=False)

    def person(self) -> TestClient:
        """A client logged in with the person's token."""
        client = self.client()
        answer = client.post("/console/login", data={"token": self.setup.tokens["person"]}, headers=SAME)
        assert answer.status_code == 303 and answer.headers["location"] == "/console", answer.text
        return client

    def store(
        self, key: str, content: str = "some text", *, agent: bool = False, mind: str = MIND, **fields: Any
    ) -> Any:
        caller = Caller(mind, Source.AGENT if agent else Source.USER, "test")
        category = fields.pop("category", "fact")
        return self.minds.call_sync(caller, lambda vault: vault.store(category, key, content, **fields)).memory

    def vault_call(self, fn: Any, mind: str = MIND) -> Any:
        return self.minds.call_sync(Caller(mind, Source.USER, "test"), fn)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def page(client: TestClient, path: str, status: int = 200) -> str:
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code, answer.text[-1500:])
    assert answer.headers["content-type"].startswith("text/html")
    return answer.text


def post(client: TestClient, path: str, form: dict[str, str], headers: dict[str, str] | None = None) -> Any:
    return client.post(path, data=form, headers=SAME if headers is None else headers)


def memory_url(memory_id: str, mind: str = MIND) -> str:
    return f"/console/m/{mind}/memory/{memory_id}"


def act(client: TestClient, memory_id: str, action: str, **extra: str) -> Any:
    html = page(client, memory_url(memory_id))
    return post(client, memory_url(memory_id), {"csrf": csrf_of(html), "action": action, **extra})
