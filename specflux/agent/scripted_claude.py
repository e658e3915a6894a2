"""The scripted Messages API server, as Claude Code talks to it: for running the real `claude`
CLI offline against a scripted model (tests/agent/test_claude_code.py, tests/mcp/).

Claude Code streams every request (`"stream": true`: server-sent events), asks
`/v1/messages/count_tokens` now and then, and besides its agent loop sends small requests of its
own (a title for the session, a check of a command's prefix, ...). The agent loop's requests are
the ones that offer tools; those are served from the script, in order. The others get `side`'s
answer (by default a short text) and are kept apart in `side_requests`.

    with ClaudeCodeServer([Reply(calls=[call("Bash", command="specflux ready")]), Reply(text="done")]) as server:
        env = server.env()   # ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, no telemetry or updates
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from specflux.agent.scripted import ScriptedServer

OFFLINE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
}


def is_agent_turn(body: dict[str, Any]) -> bool:
    """Whether a request is a turn of Claude Code's agent loop (it offers tools)."""
    return bool(body.get("tools"))


class ClaudeCodeServer(ScriptedServer):
    """A ScriptedServer that streams, counts tokens, and answers Claude Code's side requests."""

    def __init__(self, turns, route: Callable[[dict], Any] | None = None,
                 side: Callable[[dict], str] = lambda body: "ok"):
        super().__init__(turns, route)
        self.side = side
        self.side_requests: list[dict[str, Any]] = []

    def env(self) -> dict[str, str]:
        """The environment pointing Claude Code at this server, with nothing else reached."""
        return {**OFFLINE_ENV, "ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted"}

    def answer(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]]:
        if is_agent_turn(body):
            return self.respond(body, headers)
        with self._lock:
            self.side_requests.append(body)
        text = self.side(body)
        return 200, {}, {"id": "msg_side", "type": "message", "role": "assistant",
                         "model": body.get("model", "scripted"), "content": [{"type": "text", "text": text}],
                         "stop_reason": "end_turn", "stop_sequence": None,
                         "usage": {"input_tokens": 10, "output_tokens": 2}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        base = super()._handler()
        server = self

        class Handler(base):  # type: ignore[valid-type, misc]
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.read_body()
                path = self.route()
                if path == "/v1/messages/count_tokens":
                    return self._send(200, {}, {"input_tokens": max(1, len(raw) // 4)})
                if path != "/v1/messages":
                    return self._send(404, {}, server.error_body(404, self.path))
                body = self.parse_json(raw, server.error_body(400, "body is not JSON"))
                if body is None:
                    return
                status, headers, payload = server.answer(body, self.lower_headers())
                if status != 200 or not body.get("stream"):
                    return self._send(status, headers, payload)
                data = sse_events(payload)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_scripted")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - settings, models, ...: none here
                self._send(404, {}, server.error_body(404, self.path))

        return Handler


def sse_events(message: dict[str, Any]) -> bytes:
    """`message` as the Messages API streams it: server-sent events, one content block at a time."""

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [event("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            out.append(event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}))
            out.append(event("content_block_delta", {"index": index, "delta": {"type": "text_delta",
                                                                                "text": block["text"]}}))
        else:
            out.append(event("content_block_start", {"index": index, "content_block": {**block, "input": {}}}))
            out.append(event("content_block_delta", {"index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        out.append(event("content_block_stop", {"index": index}))
    out.append(event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                       "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    out.append(event("message_stop", {}))
    return "".join(out).encode()
