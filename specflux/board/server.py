"""`specflux board --serve`: the control room, served on this machine.

Routes: `/` the page; `/api/data` its data; `/api/stream` server-sent events (the data again
whenever it changes, and the lines of runs the page started); `/api/diff` a task's change in a
run; `POST /api/action` an action (actions.py). Everything but `/` with the token answers only to a
holder of the server's secret token:

- the URL printed at start carries it (`?token=...`, the way Jupyter does); `/` with it sets a
  cookie (`HttpOnly`, `SameSite=Strict`: another site's requests do not carry it) and the page
  keeps the token to send as a header;
- an action needs the header `X-Specflux-Token` (a form or an image on another site cannot set a
  header, and a script there cannot without this server's CORS consent, which it never gives) and,
  when the browser names one, an `Origin` that is this server's own;
- on a loopback address the `Host` must be a name of this machine (a page elsewhere cannot rebind
  a name of its own to the server);
- `--read-only` serves the page with no actions at all.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from specflux.base.errors import SpecfluxError, UsageError
from specflux.board.live import Board

if TYPE_CHECKING:
    from specflux.board.actions import Actions
    from specflux.store.manager import TaskStateManager

COOKIE = "specflux_board"
MAX_BODY = 1 << 20  # an action's JSON: requirements text at most, never a megabyte
STREAM_BEAT_S = 15.0  # a comment line on an idle stream, so a dead page is noticed


class Room:
    """What the handler needs: the board, the token, the actions (None: read-only), the origins
    and host names it accepts."""

    def __init__(self, board: Board, token: str, actions: "Actions | None"):
        self.board, self.token, self.actions = board, token, actions
        self.hosts: set[str] | None = None
        self.origins: set[str] = set()

    def bind(self, host: str, port: int) -> str:
        """The names this server answers to; returns the URL to print (with the token)."""
        shown = f"[{host}]" if ":" in host else host
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        names = {"localhost", "127.0.0.1", "[::1]", shown.lower()}
        self.hosts = {f"{n}:{port}" for n in names} if loopback else None
        self.origins = {f"http://{n}:{port}" for n in names}
        return f"http://{shown}:{port}/?token={self.token}"

    def holds_token(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())


def _handler(room: Room):
    class Handler(BaseHTTPRequestHandler):
        server_version = "specflux-board"
        protocol_version = "HTTP/1.1"

        # ------------------------------------------------------------ checks

        def _host_ok(self) -> bool:
            return room.hosts is None or (self.headers.get("Host") or "").lower() in room.hosts

        def _cookie_token(self) -> str | None:
            for part in (self.headers.get("Cookie") or "").split(";"):
                name, _, value = part.strip().partition("=")
                if name == COOKIE:
                    return value
            return None

        def _authorised(self, query: dict[str, list[str]]) -> bool:
            given = self.headers.get("X-Specflux-Token") or self._cookie_token() or (query.get("token") or [None])[0]
            return room.holds_token(given)

        # ------------------------------------------------------------ routes

        def do_GET(self) -> None:
            self._get(body=True)

        def do_HEAD(self) -> None:
            self._get(body=False)

        def _get(self, body: bool) -> None:
            if not self._host_ok():
                return self._text(403, "forbidden host\n", body)
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if not self._authorised(query):
                return self._text(403, "this board needs its token: open the URL `specflux board --serve` printed "
                                       "(http://HOST:PORT/?token=...)\n", body)
            if url.path == "/":
                token = (query.get("token") or [None])[0]
                cookie = f"{COOKIE}={room.token}; HttpOnly; SameSite=Strict; Path=/" if token else None
                return self._send(200, "text/html; charset=utf-8", room.board.page, body, cookie=cookie)
            if url.path == "/api/data":
                return self._send(200, "application/json", room.board.data_json, body)
            if url.path in ("/version", "/api/version"):
                return self._send(200, "application/json", room.board.version_json(), body)
            if url.path == "/api/stream" and body:
                return self._stream((query.get("v") or [""])[0])
            if url.path == "/api/diff" and room.actions is not None:
                return self._answer(lambda: room.actions.diff((query.get("run") or [""])[0], (query.get("task") or [""])[0]))
            return self._text(404, "not found\n", body)

        def do_POST(self) -> None:
            if not self._host_ok():
                return self._text(403, "forbidden host\n", True)
            origin = self.headers.get("Origin")
            if origin is not None and origin not in room.origins:
                return self._json(403, {"error": f"refused: a request from {origin}, not from this board's page"})
            if not room.holds_token(self.headers.get("X-Specflux-Token")):
                return self._json(403, {"error": "refused: this action needs the board's token (X-Specflux-Token)"})
            if urlsplit(self.path).path != "/api/action":
                return self._json(404, {"error": "not found"})
            if room.actions is None:
                return self._json(403, {"error": "this board is read-only (specflux board --serve --read-only)"})
            if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
                return self._json(415, {"error": "an action is JSON (Content-Type: application/json)"})
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY:
                return self._json(400, {"error": f"an action is 1 byte to {MAX_BODY} bytes of JSON"})
            try:
                request = json.loads(self.rfile.read(length))
            except ValueError as e:
                return self._json(400, {"error": f"not JSON: {e}"})
            self._answer(lambda: room.actions.perform(request))

        # ------------------------------------------------------------ answers

        def _answer(self, act) -> None:
            from specflux.board.actions import Conflict

            try:
                result = act()
            except Conflict as e:
                room.board.poke()
                return self._json(409, {"error": str(e), "conflict": True, "task": e.task})
            except SpecfluxError as e:
                return self._json(400 if isinstance(e, UsageError) else 422, {"error": str(e)})
            room.board.poke()
            self._json(200, result)

        def _stream(self, seen: str) -> None:
            """Server-sent events: `data` (the whole data) whenever its version moves past `seen`,
            `output` for the lines of runs the page started."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Accel-Buffering", "no")
            self.end_headers()
            self.close_connection = True
            launcher = room.actions.launcher if room.actions is not None else None
            lines_seen = launcher.mark() if launcher is not None else 0
            quiet_since = time.monotonic()
            try:
                while not getattr(self.server, "stopping", False):
                    sent = False
                    if room.board.version != seen:
                        seen, payload = room.board.snapshot()
                        self.wfile.write(b"event: data\ndata: " + payload + b"\n\n")
                        sent = True
                    if launcher is not None:
                        lines_seen, lines = launcher.since(lines_seen)
                        if lines:
                            self.wfile.write(b"event: output\ndata: " + json.dumps(lines).encode() + b"\n\n")
                            sent = True
                    if not sent and time.monotonic() - quiet_since > STREAM_BEAT_S:
                        self.wfile.write(b": beat\n\n")  # a page gone is noticed here
                        sent = True
                    if sent:
                        self.wfile.flush()
                        quiet_since = time.monotonic()
                    room.board.wait(seen, timeout=0.2)
            except (ConnectionError, TimeoutError, OSError):
                return

        def _json(self, code: int, value: Any) -> None:
            from specflux.board.page import embed

            self._send(code, "application/json", embed(value).encode("utf-8"), True)

        def _text(self, code: int, text: str, body: bool) -> None:
            self._send(code, "text/plain; charset=utf-8", text.encode("utf-8"), body)

        def _send(self, code: int, kind: str, data: bytes, body: bool, cookie: str | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")  # the token in the URL goes nowhere
            self.send_header("X-Frame-Options", "DENY")
            if cookie:
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the page streams

    return Handler


def serve(manager: "TaskStateManager", host: str, port: int, out: Path | None = None, *, read_only: bool = False,
          remote: str | None = None) -> int:
    """Serve the control room on http://HOST:PORT/ until Ctrl-C."""
    from specflux.board.actions import Actions

    token = secrets.token_urlsafe(24)
    actions = None if read_only else Actions(manager)
    extras = []
    if actions is not None:
        extras.append(actions.page_data)
    watcher_remote = None
    if remote:
        from specflux.board.remote_view import RemoteView

        watcher_remote = RemoteView(manager.ws.root, remote)
        extras.append(watcher_remote.page_data)

    def extra() -> dict[str, Any]:
        out_data: dict[str, Any] = {}
        for part in extras:
            out_data.update(part())
        return out_data

    board = Board(manager, out, extra=extra, page_options={"actions": actions is not None,
                                                           "token": token if actions is not None else None})
    if actions is not None:
        actions.board = board
    board.refresh()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        stopping = False

        def handle_error(self, request, client_address) -> None:
            if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                super().handle_error(request, client_address)

    room = Room(board, token, actions)
    try:
        server = Server((host, port), _handler(room))
    except OSError as e:
        raise SpecfluxError(f"cannot serve on {host}:{port}: {e.strerror or e} (another --port?)") from None
    url = room.bind(host, server.server_address[1])
    stop = threading.Event()
    threading.Thread(target=board.watch, args=(stop,), daemon=True).start()
    if watcher_remote is not None:
        threading.Thread(target=watcher_remote.watch, args=(stop, board.poke), daemon=True).start()
    mode = " (read-only)" if read_only else ""
    print(f"serving {url}{mode} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        Server.stopping = True
        stop.set()
        if actions is not None:
            actions.launcher.detach()
        server.server_close()
    return 0
