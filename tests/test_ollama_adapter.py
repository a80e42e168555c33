"""The Ollama adapter speaks Ollama's chat API: tested against a stub server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

pytest.importorskip("ollama")

from agent_loop.model import ChatModel, ModelUnavailable
from agent_loop.ollama_model import OllamaChat, build_model


class StubOllama(BaseHTTPRequestHandler):
    """POST /api/chat: echoes the last user message; records what it was sent."""

    seen: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StubOllama.seen.append({"path": self.path, **body})
        payload: dict[str, Any]
        if body.get("model") != "tiny":
            payload, status = {"error": f"model '{body.get('model')}' not found"}, 404
        else:
            payload, status = (
                {
                    "model": "tiny",
                    "created_at": "2026-01-01T00:00:00Z",
                    "done": True,
                    "message": {"role": "assistant", "content": f"  you said: {body['messages'][-1]['content']}  "},
                },
                200,
            )
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def host():
    server = HTTPServer(("127.0.0.1", 0), StubOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StubOllama.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_adapter_is_a_chat_model_and_returns_the_servers_reply(host):
    model = OllamaChat("tiny", host=host)
    assert isinstance(model, ChatModel) and model.name == "ollama:tiny"
    reply = model.complete(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}], max_tokens=12
    )
    assert reply == "you said: hello"
    (sent,) = StubOllama.seen
    assert sent["path"] == "/api/chat" and sent["model"] == "tiny" and sent["stream"] is False
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["options"]["num_predict"] == 12 and sent["options"]["temperature"] == 0.0


def test_a_model_the_server_lacks_is_model_unavailable(host):
    with pytest.raises(ModelUnavailable, match="ollama pull"):
        OllamaChat("missing", host=host).complete([{"role": "user", "content": "hi"}])


def test_no_server_is_model_unavailable():
    with pytest.raises(ModelUnavailable, match="no Ollama server"):
        OllamaChat("tiny", host="http://127.0.0.1:9", timeout=2).complete([{"role": "user", "content": "hi"}])


def test_the_demo_picks_ollama_with_model_ollama_name(host, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", host)
    model = build_model("ollama:tiny")
    assert model.name == "ollama:tiny" and model.complete([{"role": "user", "content": "x"}]) == "you said: x"
    with pytest.raises(ModelUnavailable):
        build_model("gpt-9")


def test_an_agent_turn_runs_on_the_ollama_adapter(host, tmp_path):
    import memory_lakehouse as ml
    from agent_loop.turn import run_turn

    store = ml.open(tmp_path / "s", embedder=ml.HashingEmbedder(dim=32))
    bot = ml.Principal("bot", ml.Scope("acme", "support", "bot"), role="agent")
    result = run_turn(store, OllamaChat("tiny", host=host), "what plan am I on?", by=bot)
    assert "you said" in result.reply
    store.close()
