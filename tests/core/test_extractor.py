"""memfile.extractor: capture's built-in extractor, an OpenAI-compatible chat-completions client, and the
`[capture]` table of memfile.toml that configures it.

No model is reachable from the test machine, so a real HTTP server the test starts on 127.0.0.1
(`helpers.chat.ChatServer`) stands in for one: it speaks the chat-completions protocol (a completion,
OpenAI-style errors), and also misbehaves as a server can (never answers, trickles, answers too much,
redirects elsewhere). Every call goes over a real socket.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_until
from helpers.chat import (
    ChatServer,
    completion,
    huge,
    openai_error,
    reply,
    silent,
    trickling_body,
    trickling_headers,
)

from memfile import ExtractorFailed, ExtractorNotConfigured, InvalidInput
from memfile.config import Config, load_config, render_config, unknown_settings
from memfile.errors import Face
from memfile.extractor import MAX_ANSWER_BYTES, ChatEndpoint

KEY = "sk-test-0123456789abcdefghijklmnop"  # not a key of anything
#: A deadline a call must keep, and the margin a loaded machine gets on top of it.
TIMEOUT, MARGIN = 1.0, 3.0


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's proxy settings never stand between the client and the loopback server."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def failure(endpoint: ChatEndpoint) -> ExtractorFailed:
    with pytest.raises(ExtractorFailed) as caught:
        endpoint("system", "user")
    error = caught.value
    for said in (str(error), error.said(Face.HTTP), repr(error), error.reason):
        assert KEY not in said and "0123456789abcdef" not in said, said
    assert error.url in str(error) and error.exit_code == 9
    return error


# --- a good answer, and the request as sent ---------------------------------------------------------------


def test_a_completion_gives_its_content(chat: ChatServer) -> None:
    chat.answer = completion('{"memories": [{"key": "coffee"}]}')
    assert ChatEndpoint(chat.url, "qwen")("SYSTEM", "USER") == '{"memories": [{"key": "coffee"}]}'


def test_the_request_is_a_chat_completion_at_temperature_0_without_a_key_unless_given(chat: ChatServer) -> None:
    ChatEndpoint(chat.url, "qwen2.5-7b-instruct")("You extract memories.", "user: I drink my coffee black")
    ChatEndpoint(chat.url, "llama3.2", api_key=KEY)("s", "u")
    bare, keyed = chat.requests
    assert bare.method == "POST" and bare.path == "/v1/chat/completions"
    assert bare.json == {
        "model": "qwen2.5-7b-instruct",
        "messages": [
            {"role": "system", "content": "You extract memories."},
            {"role": "user", "content": "user: I drink my coffee black"},
        ],
        "temperature": 0,
    }
    assert bare.headers["content-type"] == "application/json" and "authorization" not in bare.headers
    assert bare.headers["user-agent"].startswith("memfile/")
    assert keyed.json["model"] == "llama3.2" and keyed.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("tail", ["/v1", "/v1/", "/v1/chat/completions", "/v1/chat/completions/"])
def test_the_chat_path_is_added_to_a_base_url_once(chat: ChatServer, tail: str) -> None:
    base = f"http://127.0.0.1:{chat.port}"
    endpoint = ChatEndpoint(base + tail, "qwen")
    assert endpoint.url == f"{base}/v1/chat/completions"
    endpoint("s", "u")
    assert chat.requests[-1].path == "/v1/chat/completions"


def test_a_query_is_kept_in_the_request_and_left_out_of_messages(chat: ChatServer) -> None:
    chat.answer = openai_error(500, "boom")
    endpoint = ChatEndpoint(chat.url + "?api-version=2024-10-21", "gpt-4o")
    error = failure(endpoint)
    assert chat.requests[-1].path == "/v1/chat/completions?api-version=2024-10-21"
    assert "api-version" not in str(error) and "api-version" not in repr(endpoint)


def test_unicode_travels_as_utf8_json(chat: ChatServer) -> None:
    chat.answer = completion("Cà phê sữa đá, ☕")
    assert ChatEndpoint(chat.url, "qwen")("s", "Tôi thích cà phê") == "Cà phê sữa đá, ☕"
    assert chat.requests[-1].json["messages"][1]["content"] == "Tôi thích cà phê"


def test_the_key_is_never_in_the_endpoints_repr() -> None:
    endpoint = ChatEndpoint("https://api.example.com/v1", "gpt-4o", api_key=KEY)
    assert KEY not in repr(endpoint) and "not shown" in repr(endpoint)


# --- HTTP errors ---------------------------------------------------------------------------------------------

ERRORS = {
    400: ("'messages' must be a non-empty array", "model"),
    401: (f"Incorrect API key provided: {KEY}. You can find your API key at the dashboard.", "api_key_env"),
    404: ("The model `qwen9` does not exist or you do not have access to it.", "/v1"),
    429: ("Rate limit reached for requests", "later"),
    500: ("The server had an error while processing your request.", "log"),
}


@pytest.mark.parametrize("status", ERRORS)
def test_an_http_error_names_the_url_status_and_the_servers_words_never_the_key(chat: ChatServer, status: int) -> None:
    message, advice = ERRORS[status]
    chat.answer = openai_error(status, message)
    error = failure(ChatEndpoint(chat.url, "qwen9", api_key=KEY))
    assert error.status == status and f"answered HTTP {status}" in str(error)
    assert str(error).startswith(f"the extractor endpoint http://127.0.0.1:{chat.port}/v1/chat/completions ")
    assert message.split(KEY)[0].strip() in str(error) and advice in str(error)
    assert "nothing was written" in str(error)


def test_a_long_error_message_is_cut_short_on_one_line(chat: ChatServer) -> None:
    chat.answer = openai_error(400, "line one\nline two\x1b[31m " + "x" * 5000)
    error = failure(ChatEndpoint(chat.url, "qwen"))
    assert "line one line two" in str(error) and "\x1b" not in str(error) and "\n" not in str(error)
    assert len(str(error)) < 600


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"error": "model 'llama9' not found"}, "model 'llama9' not found"),  # Ollama's native shape
        ({"detail": "Not Found"}, "Not Found"),
        (b"<html><body>Bad Gateway</body></html>", "Bad Gateway"),
        (b"", "gave no reason"),
    ],
)
def test_an_error_in_another_shape_is_named_too(chat: ChatServer, body: bytes | dict, words: str) -> None:
    chat.answer = reply(502, body)
    assert words in str(failure(ChatEndpoint(chat.url, "qwen")))


# --- answers that are not a chat completion -------------------------------------------------------------------


def test_an_answer_that_is_not_json_is_named(chat: ChatServer) -> None:
    chat.answer = reply(200, b"<html><h1>It works!</h1></html>")
    error = failure(ChatEndpoint(chat.url, "qwen"))
    assert error.status == 200 and "not JSON" in str(error) and "It works!" in str(error)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"object": "list", "data": []}, "its keys: object, data"),
        ({"choices": []}, "its keys: choices"),
        ({"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": []}}]}, "choices"),
        ([1, 2], "a JSON list"),
        ({"error": {"message": "context length exceeded"}}, "context length exceeded"),
    ],
)
def test_json_without_a_message_content_is_named(chat: ChatServer, body: object, words: str) -> None:
    chat.answer = reply(200, json.dumps(body).encode())
    error = failure(ChatEndpoint(chat.url, "qwen"))
    assert words in str(error) and "OpenAI-compatible" in str(error)


def test_an_answer_over_the_cap_is_refused_unread(chat: ChatServer) -> None:
    chat.answer = huge(MAX_ANSWER_BYTES + 1, chunked=False)
    assert "larger than 4 MB" in str(failure(ChatEndpoint(chat.url, "qwen")))


def test_a_chunked_answer_over_the_cap_is_read_no_further_than_the_cap(chat: ChatServer) -> None:
    chat.answer = huge(20 * MAX_ANSWER_BYTES, chunked=True)
    assert "larger than 4 MB" in str(failure(ChatEndpoint(chat.url, "qwen")))
    assert wait_until(chat.left.is_set, 10), "the server went on sending 80 MB"


def test_an_answer_just_under_the_cap_is_read(chat: ChatServer) -> None:
    content = "x" * (MAX_ANSWER_BYTES - 1000)
    chat.answer = completion(content)
    assert ChatEndpoint(chat.url, "qwen")("s", "u") == content


# --- bounded: a server that never answers, trickles, or is not there -----------------------------------------


@pytest.mark.parametrize("answer", [silent, trickling_headers, trickling_body], ids=["silent", "headers", "body"])
def test_a_server_that_never_finishes_is_left_at_the_timeout(chat: ChatServer, answer) -> None:
    chat.answer = answer
    start = time.monotonic()
    error = failure(ChatEndpoint(chat.url, "qwen", timeout=TIMEOUT))
    assert time.monotonic() - start < TIMEOUT + MARGIN
    assert error.status is None and f"within {TIMEOUT:g} s" in str(error) and "[capture] timeout" in str(error)
    if answer is not silent:  # the connection is closed too, not left to trickle on
        assert wait_until(chat.left.is_set, 10)


def test_a_port_where_nothing_listens_is_named(chat: ChatServer) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    error = failure(ChatEndpoint(f"http://127.0.0.1:{port}/v1", "qwen", timeout=TIMEOUT))
    assert "refused" in str(error) and "start the server" in str(error) and error.status is None


def test_a_server_that_closes_without_answering_is_named(chat: ChatServer) -> None:
    chat.answer = lambda handler: handler.connection.shutdown(socket.SHUT_RDWR)
    assert "without an answer" in str(failure(ChatEndpoint(chat.url, "qwen")))


# --- redirects ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_host_is_refused_and_the_key_never_goes_there(chat: ChatServer, status: int) -> None:
    with ChatServer() as elsewhere:
        target = f"http://localhost:{elsewhere.port}/v1/chat/completions?token=abc"
        chat.answer = reply(status, b"", {"Location": target})
        error = failure(ChatEndpoint(chat.url, "qwen", api_key=KEY))
        assert elsewhere.requests == []
    assert error.status == status and "redirect" in str(error) and "never follows" in str(error)
    assert f"localhost:{elsewhere.port}" in str(error) and "token=abc" not in str(error)


def test_a_redirect_on_the_same_host_is_refused_too(chat: ChatServer) -> None:
    chat.answer = reply(308, b"", {"Location": f"{chat.url}/v2/chat/completions"})
    assert "set endpoint under [capture] to the URL that answers" in str(failure(ChatEndpoint(chat.url, "qwen")))
    assert len(chat.requests) == 1


# --- arguments ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/v1",
        "file:///etc/passwd",
        "127.0.0.1:8080/v1",
        "http://",
        "http://127.0.0.1:8080/my v1",
        " http://127.0.0.1:8080/v1",
        "http://127.0.0.1:8080/v1\n",
        "http://127.0.0.1:8080/v1\x00",
        "http://127.0.0.1:99999/v1",
        "http://127.0.0.1:8080/v1#x",
        "",
    ],
)
def test_an_endpoint_that_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidInput, match="endpoint") as caught:
        ChatEndpoint(url, "qwen")
    assert "http:// or https://" in str(caught.value)


def test_an_endpoint_with_a_password_is_refused_without_showing_it() -> None:
    with pytest.raises(InvalidInput, match="user:password@") as caught:
        ChatEndpoint("https://me:hunter2secret@api.example.com/v1", "gpt-4o")
    assert "hunter2secret" not in str(caught.value) and "api.example.com" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model": ""}, "model"),
        ({"model": "  "}, "model"),
        ({"model": "qwen\n"}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": 601}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": "60"}, "timeout"),
        ({"api_key": ""}, "api_key"),
        ({"api_key": f"{KEY}\r\nX-Injected: 1"}, "api_key"),
        ({"api_key": "ключ-0123456789abcdef"}, "api_key"),
    ],
)
def test_a_bad_argument_is_named_with_the_allowed_values(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidInput, match=field) as caught:
        ChatEndpoint(**{"url": "http://127.0.0.1:8080/v1", "model": "qwen"} | kwargs)
    assert "allowed" in str(caught.value) and KEY not in str(caught.value)


# --- from memfile.toml ----------------------------------------------------------------------------------------


def config_of(tmp_path: Path, text: str) -> Config:
    (tmp_path / "memfile.toml").write_text(text, encoding="utf-8")
    return load_config(tmp_path)


def test_the_capture_table_makes_the_endpoint_with_the_key_from_the_environment(
    chat: ChatServer, tmp_path: Path
) -> None:
    config = config_of(
        tmp_path, f'[capture]\nendpoint = "{chat.url}"\nmodel = "qwen"\napi_key_env = "MY_LLM_KEY"\ntimeout = 5\n'
    )
    endpoint = ChatEndpoint.from_config(config, {"MY_LLM_KEY": KEY + "\n"})
    assert endpoint.timeout == 5.0 and endpoint.model == "qwen"
    endpoint("s", "u")
    assert chat.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_without_api_key_env_no_key_is_sent_whatever_the_environment(chat: ChatServer, tmp_path: Path) -> None:
    config = config_of(tmp_path, f'[capture]\nendpoint = "{chat.url}"\nmodel = "qwen"\n')
    ChatEndpoint.from_config(config, {"OPENAI_API_KEY": KEY})("s", "u")
    assert "authorization" not in chat.requests[-1].headers


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("", "no endpoint and no model"),
        ("[capture]\nreview = false\n", "no endpoint and no model"),
        ('[capture]\nendpoint = "http://127.0.0.1:8080/v1"\n', "no model"),
        ('[capture]\nmodel = "qwen"\n', "no endpoint"),
    ],
)
def test_no_extractor_configured_says_how_to_configure_one(tmp_path: Path, text: str, missing: str) -> None:
    with pytest.raises(ExtractorNotConfigured) as caught:
        ChatEndpoint.from_config(config_of(tmp_path, text), {})
    message = str(caught.value)
    assert caught.value.exit_code == 2 and f"names {missing};" in message
    for words in ("[capture]", "endpoint =", "model =", ":8080/v1", "llama", "Ollama", ":11434/v1", "api_key_env"):
        assert words in message, words


@pytest.mark.parametrize("environ", [{}, {"MY_LLM_KEY": ""}, {"MY_LLM_KEY": "  "}, {"OTHER": KEY}])
def test_api_key_env_naming_a_variable_that_is_not_set_is_named(tmp_path: Path, environ: dict) -> None:
    config = config_of(
        tmp_path, '[capture]\nendpoint = "https://api.example.com/v1"\nmodel = "gpt-4o"\napi_key_env = "MY_LLM_KEY"\n'
    )
    with pytest.raises(ExtractorNotConfigured, match="MY_LLM_KEY, which is not set") as caught:
        ChatEndpoint.from_config(config, environ)
    assert "export MY_LLM_KEY=" in str(caught.value) and KEY not in str(caught.value)


# --- the [capture] table's settings ---------------------------------------------------------------------------


def test_the_capture_settings_are_read_and_default(tmp_path: Path) -> None:
    default = config_of(tmp_path, "")
    assert (default.capture_endpoint, default.capture_model, default.capture_api_key_env) == (None, None, None)
    assert default.capture_timeout == 60.0 and default.capture_review is True
    config = config_of(
        tmp_path,
        '[capture]\nendpoint = "https://api.example.com/v1/chat/completions?api-version=1"\nmodel = "gpt-4o mini"\n'
        'api_key_env = "_Key2"\ntimeout = 600\nreview = false\n',
    )
    assert config.capture_endpoint == "https://api.example.com/v1/chat/completions?api-version=1"
    assert config.capture_model == "gpt-4o mini" and config.capture_api_key_env == "_Key2"
    assert config.capture_timeout == 600.0 and config.capture_review is False
    assert unknown_settings(tmp_path) == []


def test_the_template_init_writes_configures_capture_once_uncommented(tmp_path: Path) -> None:
    lines = render_config("alice", None).splitlines()
    start = lines.index(next(line for line in lines if line.startswith("# [capture]")))
    block = lines[start : (lines + [""]).index("", start)]
    config = config_of(tmp_path, "\n".join(line.removeprefix("# ") for line in block) + "\n")
    endpoint = ChatEndpoint.from_config(config, {"OPENAI_API_KEY": KEY})
    assert endpoint.url == "http://127.0.0.1:8080/v1/chat/completions" and config.capture_review is True


BAD_CAPTURE = {
    "endpoint ftp": ('endpoint = "ftp://example.com/v1"', "endpoint"),
    "endpoint space": ('endpoint = "http://example.com/my v1"', "endpoint"),
    "endpoint control": ('endpoint = "http://example.com/v1\\u0007"', "endpoint"),
    "endpoint no scheme": ('endpoint = "example.com/v1"', "endpoint"),
    "endpoint number": ("endpoint = 8080", "endpoint"),
    "model empty": ('model = ""', "model"),
    "model blank": ('model = "  "', "model"),
    "model list": ('model = ["qwen"]', "model"),
    "api_key_env dash": ('api_key_env = "MY-KEY"', "api_key_env"),
    "api_key_env digit": ('api_key_env = "1KEY"', "api_key_env"),
    "api_key_env dollar": ('api_key_env = "$OPENAI_API_KEY"', "api_key_env"),
    "api_key_env empty": ('api_key_env = ""', "api_key_env"),
    "timeout zero": ("timeout = 0", "timeout"),
    "timeout negative": ("timeout = -1", "timeout"),
    "timeout over": ("timeout = 601", "timeout"),
    "timeout nan": ("timeout = nan", "timeout"),
    "timeout text": ('timeout = "60s"', "timeout"),
    "timeout bool": ("timeout = true", "timeout"),
    "review text": ('review = "yes"', "review"),
    "review number": ("review = 1", "review"),
}
ALLOWED = {
    "endpoint": "an http:// or https:// URL",
    "model": "not empty",
    "api_key_env": "the name of an environment variable",
    "timeout": "above 0, at most 600",
    "review": "true or false",
}


@pytest.mark.parametrize(("line", "key"), BAD_CAPTURE.values(), ids=BAD_CAPTURE.keys())
def test_a_bad_capture_setting_is_named_with_the_allowed_values(tmp_path: Path, line: str, key: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        config_of(tmp_path, f"[capture]\n{line}\n")
    message = str(caught.value)
    assert message.startswith(f"invalid memfile.toml: capture.{key} = ") and ALLOWED[key] in message, message


def test_capture_that_is_not_a_table_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="a table such as \\[capture\\]"):
        config_of(tmp_path, 'capture = "http://127.0.0.1:8080/v1"\n')


def test_an_endpoint_with_a_password_in_memfile_toml_is_refused_without_showing_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="user:password@") as caught:
        config_of(tmp_path, '[capture]\nendpoint = "https://me:hunter2secret@api.example.com/v1"\n')
    assert "hunter2secret" not in str(caught.value) and "hunter2secret" not in caught.value.said(Face.HTTP)
    assert "api.example.com" in str(caught.value)


@pytest.mark.parametrize("value", [f'"{KEY}"', '""', "42"])
def test_a_key_in_memfile_toml_is_refused_naming_api_key_env_never_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        config_of(tmp_path, f'[capture]\nendpoint = "https://api.example.com/v1"\napi_key = {value}\n')
    for said in (str(caught.value), caught.value.said(Face.HTTP)):
        assert "capture.api_key" in said and "keys never go in the vault" in said and "api_key_env" in said
        assert KEY not in said and "0123456789" not in said
