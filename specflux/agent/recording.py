"""Session recordings (JSONL) and the transport that replays them.

Recording happens at the HTTP level, so a recording holds exactly the JSON that went over the wire:

    {"kind": "meta", "format": 1, "model": "...", "task_id": "101", "started_at": "2025-...Z"}
    {"kind": "request", "turn": 1, "body": {...}}
    {"kind": "response", "turn": 1, "status": 200, "body": {...}}

A retried request appears again under the same turn; a failed connection is recorded as a response
with `"status": null` and an `"error"`. Headers are never written (they carry the API key).

Replay serves the recorded responses in order and checks every request body against the recorded
one. The comparison is exact, with one exception: the result of a `run_command` tool call is compared
by its first line only (`exit code: N`, or the timeout notice), because the output of a process is not
reproducible (timings, temporary paths, process ids) even when the session is.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specflux.base.errors import AgentError

if TYPE_CHECKING:
    import httpx2

FORMAT = 1


class _Transport:
    """The httpx2 transport interface, duck-typed so that importing this module stays cheap."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        pass


class Recorder:
    """Appends one session's HTTP exchanges to a JSONL file. `turn` is kept current by the backend."""

    def __init__(self, path: Path, task_id: str | None = None):
        self.path = Path(path)
        self.task_id = task_id
        self.turn = 0

    def start(self, model: str, task_id: str | None = None) -> None:
        """Begin the file afresh with its meta line: one file holds one session."""
        task_id = self.task_id if self.task_id is not None else task_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.path.write_text("", encoding="utf-8")
        self.write({"kind": "meta", "format": FORMAT, "model": model, "task_id": task_id,
                    "started_at": started})

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def _json_or_text(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return {"unparsed": data.decode("utf-8", errors="replace")}


class RecordingTransport(_Transport):
    """Sends through `inner` (an httpx2 transport) and records every body, never a header."""

    def __init__(self, inner: Any, recorder: Recorder):
        self.inner = inner
        self.recorder = recorder

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        turn = self.recorder.turn
        self.recorder.write({"kind": "request", "turn": turn, "body": _json_or_text(request.read())})
        try:
            response = self.inner.handle_request(request)
        except Exception as e:
            self.recorder.write({"kind": "response", "turn": turn, "status": None,
                                 "error": f"{type(e).__name__}: {e}"})
            raise
        response.read()
        self.recorder.write({"kind": "response", "turn": turn, "status": response.status_code,
                             "body": _json_or_text(response.content)})
        return response

    def close(self) -> None:
        self.inner.close()


class ClientTransport(_Transport):
    """Sends through a whole httpx2 client (the SDK's default one, which honours proxies)."""

    def __init__(self, client: httpx2.Client):
        self.client = client

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self.client.send(request)

    def close(self) -> None:
        self.client.close()


def load(path: Path) -> tuple[dict[str, Any], list[tuple[int, Any, dict[str, Any]]]]:
    """The meta record and the (turn, request body, response record) exchanges of a recording."""
    meta: dict[str, Any] = {}
    exchanges: list[tuple[int, Any, dict[str, Any]]] = []
    pending: tuple[int, Any] | None = None
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines(): U+2028 is text
    except OSError as e:
        raise AgentError(f"cannot read the recording: {e.strerror}", path) from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record["kind"]
        except (ValueError, TypeError, KeyError):
            raise AgentError("not a recording line (JSON with a `kind`)", path, number) from None
        if kind == "meta":
            meta = record
        elif kind == "request" and pending is None:
            pending = (record.get("turn", 0), record.get("body"))
        elif kind == "response" and pending is not None:
            exchanges.append((pending[0], pending[1], record))
            pending = None
        else:
            raise AgentError(f"unexpected {kind!r} record here", path, number)
    return meta, exchanges


def canonical(body: Any) -> Any:
    """`body` as compared by replay: `run_command` results reduced to their first line."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return body
    commands = {block.get("id") for message in body["messages"] for block in _blocks(message)
                if block.get("type") == "tool_use" and block.get("name") == "run_command"}
    messages = []
    for message in body["messages"]:
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            message = {**message, "content": [_first_line(b) if isinstance(b, dict) and b.get("type") ==
                                              "tool_result" and b.get("tool_use_id") in commands else b
                                              for b in message["content"]]}
        messages.append(message)
    return {**body, "messages": messages}


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _first_line(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, str):
        return {**block, "content": content.split("\n", 1)[0]}
    return block


def first_difference(recorded: Any, now: Any, where: str = "") -> str | None:
    """The first key path where two JSON values differ, with both values, or None."""
    if type(recorded) is not type(now):
        return f"{where or '(body)'}: recorded {_short(recorded)}, now {_short(now)}"
    if isinstance(recorded, dict):
        for key in sorted(recorded.keys() | now.keys()):
            if key not in now or key not in recorded:
                side = "now missing" if key not in now else "not recorded"
                return f"{where}.{key}".lstrip(".") + f": {side}"
            found = first_difference(recorded[key], now[key], f"{where}.{key}")
            if found:
                return found.lstrip(".")
        return None
    if isinstance(recorded, list):
        for i, (a, b) in enumerate(zip(recorded, now, strict=False)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        if len(recorded) != len(now):
            return f"{where or '(body)'}: recorded {len(recorded)} items, now {len(now)}"
        return None
    if recorded == now:
        return None
    if isinstance(recorded, str) and isinstance(now, str):
        at = next((i for i, (a, b) in enumerate(zip(recorded, now)) if a != b), min(len(recorded), len(now)))
        line = recorded.count("\n", 0, at) + 1
        return (f"{where or '(body)'}, line {line} of the text: recorded {_around(recorded, at)}, "
                f"now {_around(now, at)}")
    return f"{where or '(body)'}: recorded {_short(recorded)}, now {_short(now)}"


def _around(text: str, at: int, width: int = 30) -> str:
    """The text near offset `at`, where two strings first differ."""
    start = max(0, at - width)
    piece = json.dumps(text[start : at + width], ensure_ascii=False)
    return ("..." if start else "") + piece + ("..." if at + width < len(text) else "")


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ReplayTransport(_Transport):
    """Serves a recording's responses in order, checking each request body against the recorded one."""

    def __init__(self, recording_path: Path):
        self.path = Path(recording_path)
        self.meta, self.exchanges = load(self.path)
        self.served = 0

    @property
    def remaining(self) -> int:
        return len(self.exchanges) - self.served

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        import httpx2

        if self.served == len(self.exchanges):
            raise AgentError(f"replay ran past the end of the recording ({self.served} requests)", self.path)
        turn, recorded, response = self.exchanges[self.served]
        self.served += 1
        difference = first_difference(canonical(recorded), canonical(_json_or_text(request.read())))
        if difference:
            raise AgentError(f"replay diverged at turn {turn} (request {self.served}): {difference}", self.path)
        if response.get("status") is None:
            raise httpx2.ConnectError(response.get("error") or "recorded connection failure", request=request)
        return httpx2.Response(response["status"], json=response.get("body"), request=request)
