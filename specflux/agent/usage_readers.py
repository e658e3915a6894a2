"""What an agent CLI spent, read from its own output: input, output, cache-read and cache-write
tokens, the model, and the cost where the CLI reports one.

One reader per CLI, each fed the output line by line as it arrives (`UsageMeter.feed`), so that a
session can be stopped while it runs once its usage passes a budget; `read_usage` reads a whole
output after the fact. The shapes read, as each CLI documents them:

- **claude** (Claude Code `-p --output-format json` / `stream-json --verbose`): `system`/`init`
  names the model; each `assistant` event carries its message's `usage` (repeated for every content
  block of one message: counted once per message id); the final `result` has the session's
  `usage`, `num_turns`, `total_cost_usd` and `modelUsage` (per model), and wins.
- **codex** (`codex exec --json`): `turn.completed` carries `usage` (`input_tokens` with
  `cached_input_tokens` inside it, OpenAI's way; kept apart here); the model is not in the events.
- **gemini** (`gemini --output-format json`): one object whose `stats.models.<model>.tokens` has
  `prompt` (cached inside it), `candidates`, `cached`, `thoughts` (billed as output); with
  `--output-format stream-json`, `init` names the model and `result` has `stats` in totals.
- **aider**: after each message, `Tokens: 4.6k sent, 1.1k cache write, 2.0k cache hit, 345 received.
  Cost: $0.01 message, $0.05 session.` (tokens summed; the cost is the last `session` figure); the
  model from `Main model: NAME with ...` (or `Model: NAME with ...`) at start.
- **opencode** (`opencode run --format json`): each `step_finish` event's `part` has `tokens`
  (`input`, `output`, `reasoning`, `cache.read`, `cache.write`) and `cost`, summed.

"auto" tries each on every line. A CLI that printed none of these gives None: its usage is unknown.
"""

from __future__ import annotations

import json
import re
from typing import Any

from specflux.agent.backend import TOKEN_FIELDS, Usage

KINDS = ("claude", "codex", "gemini", "aider", "opencode", "auto")

_AIDER_TOKENS = re.compile(r"Tokens:\s*([\d.]+[kKmM]?) sent(?P<rest>(?:,\s*[\d.]+[kKmM]? cache (?:write|hit))*)"
                           r",\s*([\d.]+[kKmM]?) received")
_AIDER_PART = re.compile(r"([\d.]+[kKmM]?) cache (write|hit)")
_AIDER_COST = re.compile(r"Cost:\s*\$([\d.,]+) message,\s*\$([\d.,]+) session")
_AIDER_MODEL = re.compile(r"^(?:Main model|Model):\s*(\S+)")
_NO_USAGE = ('{"type":"user"', '{"type": "user"')  # Claude Code's tool results: never a usage
_JSON_HINTS = ('"usage"', '"model"', '"stats"', '"step_finish"', '"tokens"')


def count(value: object) -> int:
    """A token or turn count as reported, or 0 for anything that is not a positive number."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _money(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _aider_number(text: str) -> int:
    """`1.2k`, `345`, `2.5M` (aider's `format_tokens`) as a number."""
    text = text.replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    try:
        return int(round(float(text.rstrip("kKmM")) * scale))
    except ValueError:
        return 0


def claude_usage(usage: dict[str, Any]) -> Usage:
    """Claude Code reports the Messages API's own fields: cached input apart from `input_tokens`."""
    return Usage(**{name: count(usage.get(name)) for name in TOKEN_FIELDS})


def codex_usage(usage: dict[str, Any]) -> Usage:
    """Codex counts cached input inside `input_tokens` (OpenAI's way); `Usage` keeps them apart."""
    cached = count(usage.get("cached_input_tokens"))
    return Usage(input_tokens=max(count(usage.get("input_tokens")) - cached, 0),
                 output_tokens=count(usage.get("output_tokens")), cache_read_input_tokens=cached)


def gemini_usage(stats: dict[str, Any]) -> Usage | None:
    """`stats` of Gemini CLI's JSON output: per model (`models.<name>.tokens`), or the totals of
    its stream-json `result` (`input_tokens`, `output_tokens`, `cached`)."""
    models = stats.get("models")
    if isinstance(models, dict) and models:
        total, biggest = Usage(), (-1, None)
        for name, entry in models.items():
            tokens = entry.get("tokens") if isinstance(entry, dict) else None
            if not isinstance(tokens, dict):
                continue
            cached = count(tokens.get("cached"))
            one = Usage(input_tokens=max(count(tokens.get("prompt")) - cached, 0),
                        output_tokens=count(tokens.get("candidates")) + count(tokens.get("thoughts")),
                        cache_read_input_tokens=cached)
            total.add(one)
            biggest = max(biggest, (one.total, name), key=lambda pair: pair[0])
        total.model = biggest[1]
        return total if biggest[1] is not None else None
    keys = [("input_tokens", "output_tokens"), ("inputTokens", "outputTokens")]
    for inp, out in keys:
        if inp in stats or out in stats:
            cached = count(stats.get("cached") or stats.get("cached_tokens"))
            return Usage(input_tokens=max(count(stats.get(inp)) - cached, 0), output_tokens=count(stats.get(out)),
                         cache_read_input_tokens=cached)
    return None


class UsageMeter:
    """The running usage of one session, fed its output line by line."""

    def __init__(self, kind: str = "auto", model: str | None = None):
        """`model`: the model the CLI was told to use (`--model`), for output that does not name
        one (codex); a model the output names wins."""
        if kind not in KINDS:
            raise ValueError(f"no usage reader {kind!r} (readers: {', '.join(KINDS)})")
        self.kind = kind
        self.model: str | None = model
        self.turns = 0
        self._final: Usage | None = None  # a report of the whole session (claude result, codex, gemini)
        self._messages: dict[str, Usage] = {}  # claude stream-json: each message's usage, by id
        self._message_sum: Usage | None = None  # and their sum, kept as they come
        self._summed: Usage | None = None  # aider and opencode: per message / step, added up
        self._cost: float | None = None  # the CLI's own running cost

    def _wants(self, kind: str) -> bool:
        return self.kind in ("auto", kind)

    def feed(self, line: str) -> bool:
        """Read one line of output; True when it changed the running usage."""
        stripped = line.strip()
        if stripped.startswith("{"):
            if stripped.startswith(_NO_USAGE) or not any(hint in stripped for hint in _JSON_HINTS):
                return False  # most lines of a long stream (tool results): no json.loads for them
            try:
                event = json.loads(stripped)
            except ValueError:
                return False
            return isinstance(event, dict) and self.event(event)
        if self._wants("aider"):
            return self._aider(stripped)
        return False

    def event(self, event: dict[str, Any]) -> bool:
        """Read one JSON object the CLI printed; True when it changed the running usage."""
        kind = event.get("type")
        if self._wants("claude") and kind in ("system", "assistant", "result") and "stats" not in event:
            return self._claude(event)
        if self._wants("codex") and kind == "turn.completed" and isinstance(event.get("usage"), dict):
            self._final = codex_usage(event["usage"])
            self.turns += 1
            return True
        if self._wants("opencode") and kind == "step_finish" and isinstance(event.get("part"), dict):
            return self._opencode(event["part"])
        if self._wants("gemini"):
            if kind == "init" and isinstance(event.get("model"), str):
                self.model = event["model"]
                return False
            if isinstance(event.get("stats"), dict):
                found = gemini_usage(event["stats"])
                if found is not None:
                    self._final = found
                    self.model = found.model or self.model
                    return True
        return False

    def _claude(self, event: dict[str, Any]) -> bool:
        kind = event["type"]
        if kind == "system":
            if isinstance(event.get("model"), str):
                self.model = event["model"]
            return False
        if kind == "assistant":
            message = event.get("message")
            if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
                return False
            if isinstance(message.get("model"), str):
                self.model = message["model"]
            key = str(message.get("id") or len(self._messages))
            new, old = claude_usage(message["usage"]), self._messages.get(key)
            if old == new:
                return False  # the same message's next content block
            self._messages[key] = new
            total = self._message_sum or Usage()
            for name in TOKEN_FIELDS:
                setattr(total, name, getattr(total, name) + getattr(new, name) - (getattr(old, name) if old else 0))
            self._message_sum = total
            return True
        usage = event.get("usage")
        if not isinstance(usage, dict):
            return False
        self._final = claude_usage(usage)
        self.turns = count(event.get("num_turns")) or 1
        models = event.get("modelUsage")
        if isinstance(models, dict) and models:  # the model that cost most is the session's
            self.model = max(models, key=lambda m: (models[m] or {}).get("costUSD") or 0
                             if isinstance(models[m], dict) else 0)
        cost = _money(event.get("total_cost_usd"))
        if cost is not None:
            self._cost = cost
        return True

    def _opencode(self, part: dict[str, Any]) -> bool:
        tokens = part.get("tokens")
        if not isinstance(tokens, dict):
            return False
        cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
        step = Usage(input_tokens=count(tokens.get("input")),
                     output_tokens=count(tokens.get("output")) + count(tokens.get("reasoning")),
                     cache_read_input_tokens=count(cache.get("read")),
                     cache_creation_input_tokens=count(cache.get("write")))
        self._summed = (self._summed or Usage()).add(step)
        cost = _money(part.get("cost"))
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost
        self.turns += 1
        return True

    def _aider(self, line: str) -> bool:
        model = _AIDER_MODEL.match(line)
        if model:
            self.model = model.group(1)
            return False
        tokens = _AIDER_TOKENS.search(line)
        if not tokens:
            return False
        parts = {what: _aider_number(n) for n, what in _AIDER_PART.findall(tokens.group("rest"))}
        hit, write = parts.get("hit", 0), parts.get("write", 0)
        sent = _aider_number(tokens.group(1))  # the whole prompt, cached parts inside it
        message = Usage(input_tokens=max(sent - hit - write, 0), output_tokens=_aider_number(tokens.group(3)),
                        cache_read_input_tokens=hit, cache_creation_input_tokens=write)
        self._summed = (self._summed or Usage()).add(message)
        cost = _AIDER_COST.search(line)
        if cost:
            self._cost = float(cost.group(2).replace(",", ""))
        self.turns += 1
        return True

    def usage(self) -> Usage | None:
        """What the session spent so far, or None when nothing said so."""
        found = self._final or self._summed or self._message_sum
        if found is None:
            return None
        out = Usage(**{name: getattr(found, name) for name in TOKEN_FIELDS}, model=found.model or self.model)
        if self._cost is not None:
            out.cost_usd, out.cost_reported = self._cost, True
        return out


def read_usage(kind: str, text: str) -> Usage | None:
    """What the CLI of `kind` says it spent in `text` (all it printed), or None when it says nothing."""
    return read_usage_and_turns(kind, text)[0]


def read_usage_and_turns(kind: str, text: str, model: str | None = None) -> tuple[Usage | None, int]:
    meter = UsageMeter(kind, model)
    try:
        whole = json.loads(text)  # one JSON value over many lines (gemini json, claude json --verbose)
    except ValueError:
        for line in text.splitlines():
            meter.feed(line)
    else:
        for item in whole if isinstance(whole, list) else [whole]:
            if isinstance(item, dict):
                meter.event(item)
    return meter.usage(), meter.turns


def parse_usage(output: str) -> tuple[Usage, int] | None:
    """Tokens and turns from an agent CLI's output (any reader), or None when it printed none."""
    usage, turns = read_usage_and_turns("auto", output)
    return None if usage is None else (usage, turns or 1)
