"""The scripted OpenAI and Gemini servers (scripted_openai.py, scripted_gemini.py), over real HTTP:
the shapes the agent CLIs read (test_cli_presets.py runs the CLIs themselves when installed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from specflux.agent.scripted import Fail, Reply, call
from specflux.agent.scripted_gemini import ScriptedGemini
from specflux.agent.scripted_openai import ScriptedOpenAI

USAGE = {"input_tokens": 70, "output_tokens": 20, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 0}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "edit files"}


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]
    text: str

    def json(self):
        return json.loads(self.text)


class http:
    """POST and GET with the standard library: the test needs nothing the package does not
    (httpx is not a dependency; the anthropic SDK brings httpx2)."""

    @staticmethod
    def _send(request: urllib.request.Request) -> Response:
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return Response(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode())
        except urllib.error.HTTPError as e:
            return Response(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode())

    @classmethod
    def post(cls, url: str, json: object) -> Response:
        data = globals()["json"].dumps(json).encode()
        return cls._send(urllib.request.Request(url, data=data, method="POST",
                                                headers={"content-type": "application/json"}))

    @classmethod
    def get(cls, url: str) -> Response:
        return cls._send(urllib.request.Request(url))


def events(response: Response) -> list[tuple[str | None, object]]:
    """(event name, data) of each server-sent event; data parsed as JSON unless it is `[DONE]`."""
    out, name = [], None
    for line in response.text.splitlines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
            out.append((name, data if data == "[DONE]" else json.loads(data)))
            name = None
    return out


def test_responses_streamed_as_codex_reads_them():
    turn = Reply(text="patching", calls=[call("apply_patch", input="*** Begin Patch\n*** End Patch\n"),
                                         call("exec_command", cmd="ls")], usage=USAGE)
    with ScriptedOpenAI([turn]) as server:
        body = {"model": "gpt-5.5", "stream": True, "input": [], "tools": [APPLY_PATCH]}
        got = http.post(f"{server.base_url}/v1/responses", json=body)
        assert server.requests == [body]
    assert got.headers["content-type"] == "text/event-stream"
    stream = events(got)
    names = [name for name, _ in stream]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert "response.output_text.delta" in names
    done = [data["item"] for name, data in stream if name == "response.output_item.done"]
    assert [item["type"] for item in done] == ["message", "custom_tool_call", "function_call"]
    assert done[0]["content"][0]["text"] == "patching"
    assert done[1]["input"] == "*** Begin Patch\n*** End Patch\n"  # a freeform tool: the text itself
    assert json.loads(done[2]["arguments"]) == {"cmd": "ls"} and done[2]["call_id"]
    usage = stream[-1][1]["response"]["usage"]
    assert (usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"], usage["output_tokens"]) == (100, 30, 20)


def test_chat_completions_streamed_and_not():
    turns = [Reply(calls=[call("bash", command="ls")], usage=USAGE), Reply(text="done")]
    with ScriptedOpenAI(turns) as server:
        streamed = http.post(f"{server.base_url}/v1/chat/completions",
                              json={"model": "m", "stream": True, "stream_options": {"include_usage": True},
                                    "messages": []})
        whole = http.post(f"{server.base_url}/v1/chat/completions", json={"model": "m", "messages": []}).json()
        models = http.get(f"{server.base_url}/v1/models").json()
    stream = events(streamed)
    assert stream[-1] == (None, "[DONE]")
    calls = [c for _, chunk in stream[:-1] for choice in chunk["choices"] for c in choice["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "bash" and json.loads(calls[0]["function"]["arguments"]) == {"command": "ls"}
    assert [choice["finish_reason"] for _, chunk in stream[:-1] for choice in chunk["choices"]][-1] == "tool_calls"
    assert stream[-2][1]["usage"]["prompt_tokens"] == 100  # cached input counted inside, OpenAI's way
    assert whole["choices"][0]["message"]["content"] == "done" and whole["choices"][0]["finish_reason"] == "stop"
    assert {"scripted", "m"} <= {model["id"] for model in models["data"]}


def test_openai_failures_and_the_end_of_the_script():
    with ScriptedOpenAI([Fail(429, retry_after=2, message="slow down")]) as server:
        limited = http.post(f"{server.base_url}/v1/responses", json={"model": "m", "input": []})
        over = http.post(f"{server.base_url}/v1/chat/completions", json={"model": "m", "messages": []})
        lost = http.post(f"{server.base_url}/v1/embeddings", json={})
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert limited.json()["error"]["message"] == "slow down"
    assert over.status_code == 400 and "no more turns" in over.json()["error"]["message"]
    assert lost.status_code == 404


def test_gemini_generate_content_streamed_and_not():
    turns = {"main": [Reply(calls=[call("read_file", file_path="/a.py")], usage=USAGE), Reply(text="done")]}
    with ScriptedGemini(turns, route=lambda body: "main") as server:
        base = f"{server.base_url}/v1beta/models/gemini-2.5-flash"
        streamed = http.post(f"{base}:streamGenerateContent?alt=sse", json={"contents": []})
        counted = http.post(f"{base}:countTokens", json={"contents": [{"parts": [{"text": "hello"}]}]}).json()
        whole = http.post(f"{base}:generateContent", json={"contents": []}).json()
        assert [body["_method"] for body in server.requests] == ["streamGenerateContent", "generateContent"]
        assert server.requests[0]["_model"] == "gemini-2.5-flash"
    [(_, answer)] = events(streamed)
    part = answer["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "read_file" and part["functionCall"]["args"] == {"file_path": "/a.py"}
    assert answer["usageMetadata"]["promptTokenCount"] == 100 and answer["usageMetadata"]["cachedContentTokenCount"] == 30
    assert counted["totalTokens"] > 0  # countTokens takes no turn
    assert whole["candidates"][0]["content"]["parts"] == [{"text": "done"}]
    assert whole["candidates"][0]["finishReason"] == "STOP"


def test_gemini_errors():
    with ScriptedGemini([Fail(503, message="overloaded")]) as server:
        failed = http.post(f"{server.base_url}/v1beta/models/m:generateContent", json={"contents": []})
        unknown = http.post(f"{server.base_url}/v1beta/models/m:embedContent", json={})
    assert failed.status_code == 503 and failed.json()["error"] == {"code": 503, "message": "overloaded",
                                                                     "status": "UNAVAILABLE"}
    assert unknown.status_code == 404
