"""The Anthropic backend: a plain tool-use loop on `client.messages.create`.

The only module that imports `anthropic` (and httpx2), always inside a function: the import costs
~750 ms and no command but a live session should pay for it. Retries are done here, not by the SDK
(the client is built with `max_retries=0`), so they are deterministic and testable with a fake sleep.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specflux.agent.backend import TOKEN_FIELDS, SessionOutcome, SessionRequest, Usage
from specflux.agent.recording import ClientTransport, Recorder, RecordingTransport, ReplayTransport
from specflux.agent.tools import Toolbox
from specflux.base.errors import AgentError

RETRY_STATUSES = frozenset({429, 500, 502, 503, 529})
MAX_RETRY_AFTER_S = 60.0
CACHE = {"type": "ephemeral"}


def _is_local(url: str | None) -> bool:
    host = urlsplit(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_client(transport: Any = None, api_key: str | None = None, base_url: str | None = None) -> Any:
    """An `anthropic.Anthropic` with SDK retries off; ANTHROPIC_API_KEY / _BASE_URL still apply.

    `transport` is an httpx2 transport to send through (recording, replay, tests).
    """
    import anthropic
    import httpx2

    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL")
    has_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    if not has_key and _is_local(base_url):
        api_key = "specflux-local"  # a local stand-in for the API needs no key, but the SDK wants one
    kwargs: dict[str, Any] = {"max_retries": 0, "api_key": api_key, "base_url": base_url}
    if transport is not None:
        kwargs["http_client"] = httpx2.Client(transport=transport, follow_redirects=True)
    try:
        client = anthropic.Anthropic(**{k: v for k, v in kwargs.items() if v is not None})
    except anthropic.CredentialsError as e:  # a named or configured profile that cannot be read
        raise AgentError(f"cannot load Anthropic credentials: {e}") from None
    if client.api_key is None and client.auth_token is None and client.credentials is None:
        client.close()
        raise AgentError("no Anthropic API key: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL to a local "
                         "stand-in), or run an agent CLI (--agent claude, --agent command --cmd CMD)")
    return client


def check_credentials(api_key: str | None = None, base_url: str | None = None) -> None:
    """Raise AgentError when `make_client` would find no credentials; sends nothing.

    A key or token in the environment, or a local stand-in for the API, is enough without
    importing the SDK; otherwise its own chain decides (a credentials profile on disk, workload
    identity), by building the client - which reads files, never the network - and closing it.
    """
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL")
    if api_key or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN") or _is_local(base_url):
        return
    make_client(api_key=api_key, base_url=base_url).close()


def check_recording(path: Path) -> None:
    """Raise AgentError, naming `path`, unless it is a readable file whose first line is a recording record."""
    how = "give --recording the path of a .jsonl file that a `specflux run` recorded"
    try:
        with Path(path).open(encoding="utf-8") as f:
            first = f.readline()
    except OSError as e:
        raise AgentError(f"cannot read the recording ({e.strerror}): {how}", path) from None
    except UnicodeDecodeError:
        first = ""
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not isinstance(record, dict) or "kind" not in record:
        raise AgentError(f"not a recording (its first line is not a JSON record with a `kind`): {how}", path, 1)


def _client(recorder: Recorder | None, api_key: str | None = None, base_url: str | None = None) -> Any:
    """The default client, sending through the SDK's own HTTP client, recording when asked."""
    if recorder is None:
        return make_client(api_key=api_key, base_url=base_url)
    import anthropic

    inner = ClientTransport(anthropic.DefaultHttpxClient())
    return make_client(RecordingTransport(inner, recorder), api_key=api_key, base_url=base_url)


def _usage(api_usage: Any, model: str | None = None) -> Usage:
    """One response's usage; unknown (saying why) when the API's numbers are not believed
    (usage_checks.py: the same rule as for an agent CLI's)."""
    from specflux.agent.usage_checks import Untrusted, tokens

    try:
        return Usage(**{name: tokens(name, getattr(api_usage, name, None)) for name in TOKEN_FIELDS}, model=model)
    except Untrusted as e:
        return Usage.unknown(f"the API's {e}")


def _param(block: Any) -> dict[str, Any]:
    """A response content block as a request content block."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)


def _with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with a cache breakpoint on the last block, so each turn reads the previous ones."""
    last = copy.copy(messages[-1])
    last["content"] = [*last["content"][:-1], {**last["content"][-1], "cache_control": CACHE}]
    return [*messages[:-1], last]


class AnthropicBackend:
    """Runs a session against the Messages API (or anything speaking it: a local server, a replay).

    `client_factory()` builds the client for each session; without one, the default client is used,
    recording to `recorder` when one is given. A custom factory that wants recording wraps its
    transport in `RecordingTransport(inner, recorder)` itself (see `live_backend`).

    `check()` is what `preflight` runs: the credentials check for the default client, nothing
    for a custom factory unless one is given (`live_backend` and `replay_backend` give theirs).
    """

    def __init__(self, client_factory: Callable[[], Any] | None = None, recorder: Recorder | None = None,
                 max_retries: int = 4, backoff_base_s: float = 1.0, sleep: Callable[[float], None] = time.sleep,
                 *, echo: Callable[[str], None] | None = None, check: Callable[[], None] | None = None):
        self.check = check or (check_credentials if client_factory is None else (lambda: None))
        self.client_factory = client_factory or (lambda: _client(recorder))
        self.recorder = recorder
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.sleep = sleep
        self.echo = echo or (lambda line: None)

    def preflight(self) -> None:
        """Raise AgentError for a set-up mistake (no credentials, no readable recording) before
        the session changes anything; never reaches the network."""
        self.check()

    def run(self, request: SessionRequest, toolbox: Toolbox) -> SessionOutcome:
        """One session: until the role's hand-off (end_session, submit_review, submit_tasks; the stop
        is "end_session" for each), a reply without tool calls, a limit, an error or Ctrl-C."""
        started = time.monotonic()
        outcome = SessionOutcome(stop="error", recording=self.recorder.path if self.recorder else None)
        client = self.client_factory()
        try:
            if self.recorder is not None:
                self.recorder.start(request.model, request.task_id)
            outcome.stop, outcome.error = self._loop(client, request, toolbox, outcome)
        except KeyboardInterrupt:
            outcome.stop, outcome.error = "interrupted", "interrupted by the user"
        finally:
            client.close()
            outcome.handoff = toolbox.ended
            outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome

    def _loop(self, client: Any, request: SessionRequest, toolbox: Toolbox,
              outcome: SessionOutcome) -> tuple[Any, str | None]:
        status_error, connection_error = _api_errors(client)
        system = [{"type": "text", "text": request.system, "cache_control": CACHE}]
        tools = toolbox.specs  # the role's tools; a fresh copy
        tools[-1]["cache_control"] = CACHE
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": request.context}]}]
        while outcome.turns < request.max_turns:
            outcome.turns += 1
            if self.recorder is not None:
                self.recorder.turn = outcome.turns
            try:
                response = self._create(client, model=request.model, max_tokens=request.max_tokens,
                                        system=system, tools=tools, messages=_with_cache_breakpoint(messages))
            except status_error as e:
                return "error", _api_error(e)
            except connection_error as e:
                return "error", f"could not reach the API at {client.base_url}: {e.__cause__ or e}"
            outcome.usage.add(_usage(response.usage, getattr(response, "model", None) or request.model))
            messages.append({"role": "assistant", "content": [_param(b) for b in response.content]})
            for block in response.content:
                if block.type == "text" and block.text.strip():
                    self.echo(block.text.strip())
            uses = [b for b in response.content if b.type == "tool_use"]
            if not uses:
                if response.stop_reason == "refusal":
                    return "error", "the model refused to continue"
                return "end_turn", None
            results = []
            for use in uses:
                self.echo(f"[turn {outcome.turns}] {use.name} {_brief(use.input)}")
                result = toolbox.call(use.name, use.input)
                results.append({"type": "tool_result", "tool_use_id": use.id, "content": result.content,
                                "is_error": result.is_error})
                if toolbox.handed_in:  # end_session, submit_review or submit_tasks was accepted
                    return "end_session", None
            messages.append({"role": "user", "content": results})
            over = request.over_budget(outcome.usage)
            if over is not None:
                return over
        return "max_turns", None

    def _create(self, client: Any, **params: Any) -> Any:
        """`client.messages.create` with our own retries on rate limits, overload and connection loss."""
        status_error, connection_error = _api_errors(client)
        for attempt in range(self.max_retries + 1):
            try:
                return client.messages.create(**params)
            except status_error as e:
                if e.status_code not in RETRY_STATUSES or attempt == self.max_retries:
                    raise
                delay = self._delay(attempt, e.response.headers.get("retry-after"))
            except connection_error as e:
                if isinstance(e.__cause__, AgentError):  # a replay that diverged: not a network problem
                    raise e.__cause__ from None
                if attempt == self.max_retries:
                    raise
                delay = self._delay(attempt, None)
            self.echo(f"[retrying in {delay:g}s]")
            self.sleep(delay)
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        try:
            return min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return self.backoff_base_s * 2**attempt


def _api_errors(client: Any) -> tuple[type[BaseException], type[BaseException]]:
    """(status error, connection error) that `client` raises: the SDK's, unless the client names
    its own (a replay's `RecordedClient`, which spares a replay the SDK's import)."""
    own = getattr(client, "api_errors", None)
    if isinstance(own, tuple):
        return own
    import anthropic

    return anthropic.APIStatusError, anthropic.APIConnectionError


def _api_error(e: Any) -> str:
    """`the API answered 400 (invalid_request_error): prompt is too long`."""
    error = e.body.get("error") if isinstance(e.body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return f"the API answered {e.status_code} ({error.get('type', 'error')}): {error['message']}"
    return f"the API answered {e.status_code}: {e.message}"


def _brief(value: dict[str, Any], limit: int = 100) -> str:
    text = " ".join(f"{k}={v!r}" for k, v in value.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def live_backend(recording: Path | None = None, *, task_id: str | None = None, api_key: str | None = None,
                 base_url: str | None = None, **options: Any) -> AnthropicBackend:
    """The real API (or `base_url`), recording each session to `recording` when given."""
    recorder = Recorder(recording, task_id) if recording is not None else None
    return AnthropicBackend(lambda: _client(recorder, api_key, base_url), recorder,
                            check=lambda: check_credentials(api_key, base_url), **options)


def replay_backend(path: Path, **options: Any) -> AnthropicBackend:
    """Replays a recording: the same loop and real tools, the model's side served from the file
    (without the SDK where the recording allows: replay_client.py)."""
    from specflux.agent.replay_client import recorded_client

    options.setdefault("sleep", lambda seconds: None)
    return AnthropicBackend(
        client_factory=lambda: recorded_client(path) or make_client(ReplayTransport(path), api_key="replay",
                                                                     base_url="https://replay.invalid"),
        check=lambda: check_recording(path),
        **options,
    )
