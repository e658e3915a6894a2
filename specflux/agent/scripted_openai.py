"""A scripted stand-in for OpenAI's APIs: a real local HTTP server that agent CLIs speaking them
(Codex, aider, opencode) can be pointed at, replaying a script of model turns.

    with ScriptedOpenAI([Reply(calls=[call("shell", command=["bash", "-lc", "cat a.py"])]),
                         Reply(text="done")]) as server:
        ...  # base_url: f"{server.base_url}/v1"

Two APIs, as the CLIs use them:

- Responses, `POST /v1/responses`: server-sent events when the request says `"stream": true`
  (Codex always does): `response.created`, each output item `added` then `done` (text as
  `output_text` deltas), `response.completed` with the usage; one JSON response otherwise. A call
  to a tool the request declares as `"type": "custom"` (Codex's freeform `apply_patch`) is a
  `custom_tool_call` whose input is the call's `input` argument, as text.
- Chat Completions, `POST /v1/chat/completions`: `chat.completion.chunk` events ending in
  `data: [DONE]` when streamed (with a usage chunk when `stream_options.include_usage` asks),
  one `chat.completion` otherwise.

`GET /v1/models` lists the models the requests named so far (and `scripted`). Turns, scripts by
name and `route`, `requests` and `headers` are those of `ScriptedServer` (scripted.py): `Reply`
(text, then tool calls; its `usage` in the Messages API's terms, turned into OpenAI's, where
cached input counts inside the input), and `Fail` (answered with OpenAI's error shape).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterator

from specflux.agent.scripted import Fail, JsonHandler, Reply, ScriptedServer, ToolCall, call

__all__ = ["Fail", "Reply", "ScriptedOpenAI", "ToolCall", "call"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_exceeded",
                500: "server_error", 503: "server_error"}

Events = Iterator[tuple[str | None, dict[str, Any] | str]]  # (SSE event name, data) pairs


def _tokens(turn: Reply) -> tuple[int, int, int]:
    """(input with cached, cached, output) from a Reply's Messages-API usage."""
    usage = turn.usage
    cached = usage.get("cache_read_input_tokens", 0)
    return usage.get("input_tokens", 0) + cached, cached, usage.get("output_tokens", 0)


def _error(turn: Fail) -> tuple[int, dict[str, str], dict[str, Any]]:
    extra = {"retry-after": f"{turn.retry_after:g}"} if turn.retry_after is not None else {}
    kind = _ERROR_TYPES.get(turn.status, "server_error")
    return turn.status, extra, {"error": {"message": turn.message, "type": kind, "param": None, "code": kind}}


# --------------------------------------------------------------------- Responses


def _custom_tools(body: dict[str, Any]) -> set[str]:
    return {tool.get("name") for tool in body.get("tools") or [] if tool.get("type") == "custom"}


def response_items(turn: Reply, n: int, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items of a Responses API answer: a message with the text, then the calls."""
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append({"type": "message", "id": f"msg_{n:03d}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
    custom = _custom_tools(body)
    for i, c in enumerate(turn.calls, 1):
        call_id = f"call_{n:03d}_{i}"
        if c.name in custom:
            items.append({"type": "custom_tool_call", "id": f"ctc_{n:03d}_{i}", "status": "completed",
                          "call_id": call_id, "name": c.name, "input": str(c.input.get("input", ""))})
        else:
            items.append({"type": "function_call", "id": f"fc_{n:03d}_{i}", "status": "completed",
                          "call_id": call_id, "name": c.name, "arguments": json.dumps(c.input)})
    return items


def response_object(turn: Reply, n: int, body: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    total, cached, output = _tokens(turn)
    return {"id": f"resp_{n:03d}", "object": "response", "created_at": 0, "status": status,
            "model": body.get("model", "scripted"), "output": response_items(turn, n, body) if status == "completed" else [],
            "usage": {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": total + output}}


def response_events(turn: Reply, n: int, body: dict[str, Any]) -> Events:
    """The server-sent events of a streamed Responses API answer."""
    seq = iter(range(1 << 30))
    yield "response.created", {"type": "response.created", "sequence_number": next(seq),
                               "response": response_object(turn, n, body, status="in_progress")}
    for index, item in enumerate(response_items(turn, n, body)):
        opened = {**item, "status": "in_progress"}
        if item["type"] == "message":
            opened["content"] = []
        yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                             "output_index": index, "item": opened}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield "response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": index, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}
            yield "response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": index, "content_index": 0, "delta": text}
            yield "response.output_text.done", {
                "type": "response.output_text.done", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": index, "content_index": 0, "text": text}
        yield "response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                            "output_index": index, "item": item}
    yield "response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                 "response": response_object(turn, n, body)}


# --------------------------------------------------------------------- Chat Completions


def _tool_calls(turn: Reply, n: int) -> list[dict[str, Any]]:
    return [{"index": i - 1, "id": f"call_{n:03d}_{i}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.input)}}
            for i, c in enumerate(turn.calls, 1)]


def _chat_usage(turn: Reply) -> dict[str, Any]:
    total, cached, output = _tokens(turn)
    return {"prompt_tokens": total, "completion_tokens": output, "total_tokens": total + output,
            "prompt_tokens_details": {"cached_tokens": cached}}


def _finish(turn: Reply) -> str:
    return turn.stop_reason or ("tool_calls" if turn.calls else "stop")


def chat_completion(turn: Reply, n: int, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in _tool_calls(turn, n)]
    return {"id": f"chatcmpl-{n:03d}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(turn), "logprobs": None}],
            "usage": _chat_usage(turn)}


def chat_events(turn: Reply, n: int, body: dict[str, Any]) -> Events:
    """The server-sent events of a streamed Chat Completions answer, `[DONE]` last."""
    head = {"id": f"chatcmpl-{n:03d}", "object": "chat.completion.chunk", "created": 0,
            "model": body.get("model", "scripted")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield None, chunk({"role": "assistant", "content": ""})
    if turn.text:
        yield None, chunk({"content": turn.text})
    for tool_call in _tool_calls(turn, n):
        yield None, chunk({"tool_calls": [tool_call]})
    yield None, chunk({}, _finish(turn))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield None, {**head, "choices": [], "usage": _chat_usage(turn)}
    yield None, "[DONE]"


# --------------------------------------------------------------------- the server


class ScriptedOpenAI(ScriptedServer):
    """Serves `turns` in order on 127.0.0.1 over the Responses and Chat Completions APIs; use as a
    context manager; the API's base URL is `f"{server.base_url}/v1"`."""

    def answer(self, api: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        """(status, headers, payload) for a request to `api` ("responses" or "chat"): the payload is
        a JSON value, or an iterator of events when the request asked for a stream."""
        n, turn = self.next_turn(body, headers)
        if isinstance(turn, Fail):
            return _error(turn)
        if api == "responses":
            return 200, {}, response_events(turn, n, body) if body.get("stream") else response_object(turn, n, body)
        return 200, {}, chat_events(turn, n, body) if body.get("stream") else chat_completion(turn, n, body)

    def models(self) -> dict[str, Any]:
        with self._lock:
            names = dict.fromkeys(["scripted", *(str(b["model"]) for b in self.requests if b.get("model"))])
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "scripted"}
                                           for name in names]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JsonHandler):
            id_header = "x-request-id"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.route().endswith("/models"):
                    return self._send(200, {}, server.models())
                self._send(404, {}, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:  # noqa: N802
                raw = self.read_body()
                path = self.route()
                api = "responses" if path.endswith("/responses") else "chat" if path.endswith("/chat/completions") \
                    else None
                if api is None:
                    return self._send(404, {}, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                body = self.parse_json(raw, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                if body is None:
                    return
                status, headers, payload = server.answer(api, body, self.lower_headers())
                if isinstance(payload, (dict, list)):
                    return self._send(status, headers, payload)
                self._stream(payload)

            def _stream(self, events: Events) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.send_header("x-request-id", "req_scripted")
                self.end_headers()
                for name, data in events:
                    text = data if isinstance(data, str) else json.dumps(data)
                    self.wfile.write(((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode())
                    self.wfile.flush()
                self.close_connection = True

        return Handler
