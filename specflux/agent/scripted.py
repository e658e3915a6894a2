"""A scripted stand-in for the Messages API: a real local HTTP server the real SDK can talk to.

    with ScriptedServer([Reply(calls=[call("read_file", path="README.md")]),
                         Fail(429, retry_after=1),
                         Reply(calls=[call("end_session", did=["read it"], issues="", next="")])]) as server:
        backend = live_backend(base_url=server.base_url, api_key="scripted")

Each turn is served in order to each POST /v1/messages; `server.requests` holds every request body
received, for assertions. Used by the tests and by `specflux demo`.

Sessions that run at once (a workflow run's parallel lanes) ask in no set order: give `turns` as a
dict of scripts and `route(body)` to name the script each request is served from (for instance
the task and the role, read from the request), each script in its own order.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

_ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
                502: "api_error", 503: "api_error", 529: "overloaded_error"}


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any]


def call(name: str, **input: Any) -> ToolCall:
    """A scripted tool call: `call("edit_file", path="a.py", old="x", new="y")`."""
    return ToolCall(name, input)


@dataclass
class Reply:
    """One assistant response: text, then tool calls. `stop_reason` defaults from the calls."""

    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {
        "input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0})


@dataclass
class Fail:
    """An error response: 429 (with `retry_after` seconds), 529 overloaded, 500, ..."""

    status: int
    retry_after: float | None = None
    message: str = "scripted failure"


Turn = Reply | Fail


class ScriptedServer:
    """Serves `turns` in order on 127.0.0.1; use as a context manager for `.base_url`."""

    def __init__(self, turns: "list[Turn] | dict[Any, list[Turn]]", route: "Callable[[dict], Any] | None" = None):
        if isinstance(turns, dict) and route is None:
            raise ValueError("scripts by name need a route(body) naming the script of each request")
        self.scripts = {key: list(ts) for key, ts in turns.items()} if isinstance(turns, dict) else None
        self.route = route
        self.served: dict[Any, int] = {}
        self.turns = [] if isinstance(turns, dict) else list(turns)
        self.requests: list[dict[str, Any]] = []  # the JSON body of every request received
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running; use it in a `with` block")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="scripted-messages-api",
                         daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def respond(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """The status, headers and JSON body answering the next request."""
        n, turn = self.next_turn(body, headers)
        if isinstance(turn, Fail):
            extra = {"retry-after": f"{turn.retry_after:g}"} if turn.retry_after is not None else {}
            return turn.status, extra, self.error_body(turn.status, turn.message)
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [{"type": "tool_use", "id": f"toolu_{n:03d}_{i}", "name": c.name, "input": c.input}
                    for i, c in enumerate(turn.calls, 1)]
        stop = turn.stop_reason or ("tool_use" if turn.calls else "end_turn")
        return 200, {}, {"id": f"msg_scripted_{n:03d}", "type": "message", "role": "assistant",
                         "model": body.get("model", "scripted"), "content": content, "stop_reason": stop,
                         "stop_sequence": None, "usage": turn.usage}

    def next_turn(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Turn]:
        """Record the request and pick the turn answering it, with the request's number (from 1).
        The servers of other APIs (scripted_openai.py, scripted_gemini.py) share this."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            n = len(self.requests)
            if self.scripts is not None:
                key = self.route(body)
                script, i = self.scripts.get(key, []), self.served.get(key, 0)
                self.served[key] = i + 1
                turn = script[i] if i < len(script) else Fail(400, message=f"the script {key!r} has no more turns")
            else:
                turn = self.turns[n - 1] if n <= len(self.turns) else Fail(400, message="the script has no more turns")
        return n, turn

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.read_body()
                if self.route() != "/v1/messages":
                    return self._send(404, {}, server.error_body(404, self.path))
                body = self.parse_json(raw, server.error_body(400, "body is not JSON"))
                if body is not None:
                    self._send(*server.respond(body, self.lower_headers()))

        return Handler

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The Messages API's error body for `status`."""
        return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}}


class JsonHandler(BaseHTTPRequestHandler):
    """What every scripted API's request handler shares: HTTP/1.1, the body read and parsed as
    JSON (a 400 with the API's own error body when it is not), JSON answers with the API's
    content type and request-id header, and no log lines."""

    protocol_version = "HTTP/1.1"
    content_type = "application/json"
    id_header: str | None = "request-id"

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def route(self) -> str:
        """The request's path, without its query and trailing slash."""
        return self.path.split("?")[0].rstrip("/")

    def lower_headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def parse_json(self, raw: bytes, error: Any) -> Any:
        """The body as JSON, or None once a 400 with `error` is sent."""
        try:
            return json.loads(raw)
        except ValueError:
            self._send(400, {}, error)
            return None

    def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", self.content_type)
        self.send_header("content-length", str(len(data)))
        if self.id_header:
            self.send_header(self.id_header, "req_scripted")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass
