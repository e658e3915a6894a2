"""A replay's model side without the SDK: `client.messages.create` answered from a recording.

A replay (`flow replay`, `specflux run --agent replay`) used to send every request through the
`anthropic` SDK and httpx2 into `ReplayTransport`: the SDK's import alone is ~0.8 s of a replay,
and each session built a client and each turn an HTTP request and response, only to compare a
JSON body and hand back a recorded one. `RecordedClient` does the same comparison on the same
body, in process: the request is the JSON that `messages.create(**params)` sends (the SDK
serialises the loop's plain dicts as they are), checked against the recorded body exactly as
`ReplayTransport` checks it (`canonical`, `first_difference`: the same messages on a divergence),
and the recorded response is read into objects with the attributes the session loop reads.

Only recordings this reads exactly as the SDK would are served so (`fits`): every response a 200
with `text` and `tool_use` blocks and whole-number usage. Anything else (a recorded rate limit or
connection failure, which the loop retries on SDK errors; another block type; odd usage) is
replayed through the SDK and `ReplayTransport`, as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specflux.agent.recording import canonical, first_difference, load
from specflux.base.errors import AgentError

_BLOCKS = {"text": ("text",), "tool_use": ("id", "name", "input")}
_USAGE = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class _NeverRaised(Exception):
    """The SDK's error classes' stand-in: this client never raises them (a divergence is an AgentError)."""


def fits(exchanges: list[tuple[int, Any, dict[str, Any]]]) -> bool:
    """Whether every recorded response reads the same here as through the SDK."""
    for _, _, response in exchanges:
        body = response.get("body")
        if response.get("status") != 200 or not isinstance(body, dict) or not isinstance(body.get("content"), list):
            return False
        for block in body["content"]:
            if not isinstance(block, dict) or block.get("type") not in _BLOCKS:
                return False
            if block["type"] == "tool_use" and not isinstance(block.get("input"), dict):
                return False
        usage = body.get("usage")
        if not isinstance(usage, dict) or any(type(usage.get(k)) not in (int, type(None)) for k in _USAGE):
            return False
    return True


class _Record:
    """A recorded JSON object read as attributes; a missing one is None, as in the SDK's models."""

    def __init__(self, fields: dict[str, Any]):
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> None:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _message(body: dict[str, Any]) -> _Record:
    content = [_Record({"type": b["type"], **{k: b.get(k) for k in _BLOCKS[b["type"]]}}) for b in body["content"]]
    return _Record({"content": content, "usage": _Record(dict(body.get("usage") or {})),
                    "stop_reason": body.get("stop_reason"), "model": body.get("model")})


class _Messages:
    def __init__(self, client: "RecordedClient"):
        self._client = client

    def create(self, **params: Any) -> _Record:
        return self._client.answer(params)


class RecordedClient:
    """`messages.create` served from the recording at `path`, each request checked against it."""

    api_errors = (_NeverRaised, _NeverRaised)  # (status error, connection error), as the loop catches them
    base_url = "https://replay.invalid"

    def __init__(self, path: Path, exchanges: list[tuple[int, Any, dict[str, Any]]]):
        self.path = Path(path)
        self.exchanges = exchanges
        self.served = 0
        self.messages = _Messages(self)

    def answer(self, params: dict[str, Any]) -> _Record:
        if self.served == len(self.exchanges):
            raise AgentError(f"replay ran past the end of the recording ({self.served} requests)", self.path)
        turn, recorded, response = self.exchanges[self.served]
        self.served += 1
        sent = json.loads(json.dumps(params, ensure_ascii=False))  # the body as it would go over the wire
        difference = first_difference(canonical(recorded), canonical(sent))
        if difference:
            raise AgentError(f"replay diverged at turn {turn} (request {self.served}): {difference}", self.path)
        return _message(response["body"])

    def close(self) -> None:
        pass


def recorded_client(path: Path) -> RecordedClient | None:
    """A client for the recording at `path`, or None when it must be replayed through the SDK."""
    _, exchanges = load(Path(path))
    return RecordedClient(path, exchanges) if fits(exchanges) else None
