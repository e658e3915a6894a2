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

_ERROR_TYPES = {400: "invalid_request_error", 429: "rate_limit_error", 500: "api_error",
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
            error = {"type": _ERROR_TYPES.get(turn.status, "api_error"), "message": turn.message}
            return turn.status, extra, {"type": "error", "error": error}
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

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.split("?")[0].rstrip("/") != "/v1/messages":
                    return self._send(404, {}, {"type": "error", "error": {"type": "not_found_error",
                                                                           "message": self.path}})
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, {}, {"type": "error", "error": {
                        "type": "invalid_request_error", "message": "body is not JSON"}})
                self._send(*server.respond(body, {k.lower(): v for k, v in self.headers.items()}))

            def _send(self, status: int, headers: dict[str, str], payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_scripted")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler
