"""A scripted stand-in for the Gemini API: a real local HTTP server that Gemini CLI can be pointed
at (`GOOGLE_GEMINI_BASE_URL`), replaying a script of model turns.

    with ScriptedGemini([Reply(calls=[call("read_file", absolute_path="/repo/a.py")]),
                         Reply(text="done")]) as server:
        env = {"GOOGLE_GEMINI_BASE_URL": server.base_url, "GEMINI_API_KEY": "scripted"}

`POST /v1beta/models/MODEL:generateContent` answers with one `GenerateContentResponse`;
`:streamGenerateContent` (`?alt=sse`, as the SDK asks) with the same as one server-sent event;
`:countTokens` with an estimate and takes no turn. A turn's text is a `text` part, its calls
`functionCall` parts (`name`, `args`, `id`), its `usage` (the Messages API's terms) becomes
`usageMetadata` (cached input counted inside `promptTokenCount`, as Gemini counts it); a `Fail`
is Gemini's error shape (`{"error": {"code", "message", "status"}}`). Turns, scripts by name and
`route(body)`, `requests` and `headers` are those of `ScriptedServer` (scripted.py); a request's
recorded body has the model and the method added as `_model` and `_method`, for `route`.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any

from specflux.agent.scripted import Fail, JsonHandler, Reply, ScriptedServer, ToolCall, call

__all__ = ["Fail", "Reply", "ScriptedGemini", "ToolCall", "call"]

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
_ROUTE = re.compile(r"^/(?:v1beta|v1|v1alpha)/models/(?P<model>[^:/]+):(?P<method>\w+)$")


def usage_metadata(turn: Reply) -> dict[str, Any]:
    usage = turn.usage
    cached = usage.get("cache_read_input_tokens", 0)
    prompt = usage.get("input_tokens", 0) + cached
    output = usage.get("output_tokens", 0)
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output}
    if cached:
        meta["cachedContentTokenCount"] = cached
    return meta


def content_response(turn: Reply, n: int, model: str) -> dict[str, Any]:
    """A GenerateContentResponse: text, then function calls, in one candidate."""
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
    parts += [{"functionCall": {"id": f"call_{n:03d}_{i}", "name": c.name, "args": c.input}}
              for i, c in enumerate(turn.calls, 1)]
    if not parts:
        parts = [{"text": ""}]
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": turn.stop_reason or "STOP", "index": 0}],
            "usageMetadata": usage_metadata(turn), "modelVersion": model, "responseId": f"resp_{n:03d}"}


def error_body(turn: Fail) -> dict[str, Any]:
    return {"error": {"code": turn.status, "message": turn.message, "status": _STATUS.get(turn.status, "UNKNOWN")}}


def count_tokens(body: dict[str, Any]) -> dict[str, Any]:
    """`countTokens`: about 4 characters a token of the request's JSON."""
    return {"totalTokens": max(1, len(json.dumps(body)) // 4)}


class ScriptedGemini(ScriptedServer):
    """Serves `turns` in order on 127.0.0.1 as the Gemini API; use as a context manager for
    `.base_url` (what GOOGLE_GEMINI_BASE_URL takes)."""

    def answer(self, model: str, method: str, body: dict[str, Any],
               headers: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """(status, headers, JSON body) answering `method` (generateContent, streamGenerateContent)."""
        n, turn = self.next_turn({**body, "_model": model, "_method": method}, headers)
        if isinstance(turn, Fail):
            extra = {"retry-after": f"{turn.retry_after:g}"} if turn.retry_after is not None else {}
            return turn.status, extra, error_body(turn)
        return 200, {}, content_response(turn, n, model)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JsonHandler):
            content_type = "application/json; charset=UTF-8"
            id_header = None

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.read_body()
                route = _ROUTE.match(self.path.split("?")[0])
                if route is None or route["method"] not in ("generateContent", "streamGenerateContent",
                                                            "countTokens"):
                    return self._send(404, {}, error_body(Fail(404, message=f"no route {self.path}")))
                body = self.parse_json(raw, error_body(Fail(400, message="body is not JSON")))
                if body is None:
                    return
                if route["method"] == "countTokens":
                    return self._send(200, {}, count_tokens(body))
                status, headers, payload = server.answer(route["model"], route["method"], body, self.lower_headers())
                if route["method"] == "streamGenerateContent" and status == 200:
                    return self._stream(payload, sse="alt=sse" in self.path)
                self._send(status, headers, payload)

            def _stream(self, payload: dict[str, Any], sse: bool) -> None:
                """One event holding the whole answer (or, without `alt=sse`, a JSON array of one)."""
                data = (f"data: {json.dumps(payload)}\r\n\r\n" if sse else json.dumps([payload])).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream" if sse else "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
