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
A number that is not believed (usage_checks.py: not a number, not finite, negative, or past any
real session) makes the session's usage unknown, saying which and why (`Usage.why`); so does a
reader that fails on a line in any other way: nothing raised here reaches the thread reading
the agent's output.
"""

from __future__ import annotations

import math
import re
from typing import Any

from specflux.agent.backend import TOKEN_FIELDS, Usage
from specflux.agent.usage_checks import Untrusted, failed, loads, money, tokens

KINDS = ("claude", "codex", "gemini", "aider", "opencode", "auto")

_AIDER_TOKENS = re.compile(r"Tokens:\s*([\d.]+[kKmM]?) sent(?P<rest>(?:,\s*[\d.]+[kKmM]? cache (?:write|hit))*)"
                           r",\s*([\d.]+[kKmM]?) received")
_AIDER_PART = re.compile(r"([\d.]+[kKmM]?) cache (write|hit)")
_AIDER_COST = re.compile(r"Cost:\s*\$([\d.,]+) message,\s*\$([\d.,]+) session")
_AIDER_MODEL = re.compile(r"^(?:Main model|Model):\s*(\S+)")
_NO_USAGE = ('{"type":"user"', '{"type": "user"')  # Claude Code's tool results: never a usage
_JSON_HINTS = ('"usage"', '"model"', '"stats"', '"step_finish"', '"tokens"')


def count(value: object) -> int:
    """A turn count as reported, or 0 for anything that is not a finite positive number (turns
    feed no budget: not worth doubting the session for)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return int(min(value, 1_000_000_000)) if ok else 0  # type: ignore[arg-type]


def _aider_number(name: str, text: str) -> int:
    """`1.2k`, `345`, `2.5M` (aider's `format_tokens`) as a number; Untrusted past belief."""
    plain = text.replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(plain[-1:].lower(), 1)
    try:
        number = float(plain.rstrip("kKmM")) * scale
    except ValueError:
        raise Untrusted(f"{name} is {text!r}, not a number") from None
    return tokens(name, round(number) if math.isfinite(number) else number, text)


def _aider_cost(text: str) -> float | None:
    """aider's `$0.05` session cost; Untrusted past belief."""
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        raise Untrusted(f"the session cost is {text!r}, not a number") from None
    return money("the session cost", number, text)


def claude_usage(usage: dict[str, Any]) -> Usage:
    """Claude Code reports the Messages API's own fields: cached input apart from `input_tokens`."""
    return Usage(**{name: tokens(name, usage.get(name)) for name in TOKEN_FIELDS})


def codex_usage(usage: dict[str, Any]) -> Usage:
    """Codex counts cached input inside `input_tokens` (OpenAI's way); `Usage` keeps them apart."""
    cached = tokens("cached_input_tokens", usage.get("cached_input_tokens"))
    return Usage(input_tokens=max(tokens("input_tokens", usage.get("input_tokens")) - cached, 0),
                 output_tokens=tokens("output_tokens", usage.get("output_tokens")), cache_read_input_tokens=cached)


def gemini_usage(stats: dict[str, Any]) -> Usage | None:
    """`stats` of Gemini CLI's JSON output: per model (`models.<name>.tokens`), or the totals of
    its stream-json `result` (`input_tokens`, `output_tokens`, `cached`)."""
    models = stats.get("models")
    if isinstance(models, dict) and models:
        total, biggest = Usage(), (-1, None)
        for name, entry in models.items():
            counts = entry.get("tokens") if isinstance(entry, dict) else None
            if not isinstance(counts, dict):
                continue
            cached = tokens("cached", counts.get("cached"))
            one = Usage(input_tokens=max(tokens("prompt", counts.get("prompt")) - cached, 0),
                        output_tokens=tokens("candidates", counts.get("candidates"))
                        + tokens("thoughts", counts.get("thoughts")),
                        cache_read_input_tokens=cached)
            total.add(one)
            biggest = max(biggest, (one.total, name), key=lambda pair: pair[0])
        total.model = biggest[1]
        return total if biggest[1] is not None else None
    keys = [("input_tokens", "output_tokens"), ("inputTokens", "outputTokens")]
    for inp, out in keys:
        if inp in stats or out in stats:
            cached = tokens("cached", stats.get("cached") or stats.get("cached_tokens"))
            return Usage(input_tokens=max(tokens(inp, stats.get(inp)) - cached, 0),
                         output_tokens=tokens(out, stats.get(out)), cache_read_input_tokens=cached)
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
        self.doubt: str | None = None  # why the usage is not believed: then it is unknown, for good

    def distrust(self, why: str) -> None:
        """Make this session's usage unknown, saying `why` (the first reason stays)."""
        self.doubt = self.doubt or why

    def _wants(self, kind: str) -> bool:
        return self.kind in ("auto", kind)

    def feed(self, line: str) -> bool:
        """Read one line of output; True when it changed the running usage. Never raises: a
        number not believed, or any failure of the reader, makes the usage unknown (`doubt`)."""
        try:
            return self._feed(line)
        except Untrusted as e:
            self.distrust(str(e))
        except Exception as e:  # noqa: BLE001 - the reader's own failure must not end the session
            self.distrust(failed(e))
        return True

    def _feed(self, line: str) -> bool:
        stripped = line.strip()
        if stripped.startswith("{"):
            if stripped.startswith(_NO_USAGE) or not any(hint in stripped for hint in _JSON_HINTS):
                return False  # most lines of a long stream (tool results): no json.loads for them
            try:
                event = loads(stripped)
            except ValueError:
                return False  # not JSON after all: no usage in it
            except RecursionError:
                raise Untrusted("a line that looks like a usage report is nested too deeply to read") from None
            return isinstance(event, dict) and self._event(event)
        if self._wants("aider"):
            return self._aider(stripped)
        return False

    def event(self, event: dict[str, Any]) -> bool:
        """Read one JSON object the CLI printed; True when it changed the running usage. Never
        raises, as `feed`."""
        try:
            return self._event(event)
        except Untrusted as e:
            self.distrust(str(e))
        except Exception as e:  # noqa: BLE001 - as in feed
            self.distrust(failed(e))
        return True

    def _event(self, event: dict[str, Any]) -> bool:
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
        cost = money("total_cost_usd", event.get("total_cost_usd"))
        if cost is not None:
            self._cost = cost
        return True

    def _opencode(self, part: dict[str, Any]) -> bool:
        counts = part.get("tokens")
        if not isinstance(counts, dict):
            return False
        cache = counts.get("cache") if isinstance(counts.get("cache"), dict) else {}
        step = Usage(input_tokens=tokens("input", counts.get("input")),
                     output_tokens=tokens("output", counts.get("output")) + tokens("reasoning", counts.get("reasoning")),
                     cache_read_input_tokens=tokens("cache.read", cache.get("read")),
                     cache_creation_input_tokens=tokens("cache.write", cache.get("write")))
        cost = money("cost", part.get("cost"))
        self._summed = (self._summed or Usage()).add(step)
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost
        self.turns += 1
        return True

    def _aider(self, line: str) -> bool:
        model = _AIDER_MODEL.match(line)
        if model:
            self.model = model.group(1)
            return False
        said = _AIDER_TOKENS.search(line)
        if not said:
            return False
        parts = {what: _aider_number(f"cache {what}", n) for n, what in _AIDER_PART.findall(said.group("rest"))}
        hit, write = parts.get("hit", 0), parts.get("write", 0)
        sent = _aider_number("sent", said.group(1))  # the whole prompt, cached parts inside it
        message = Usage(input_tokens=max(sent - hit - write, 0), output_tokens=_aider_number("received", said.group(3)),
                        cache_read_input_tokens=hit, cache_creation_input_tokens=write)
        cost = _AIDER_COST.search(line)
        session_cost = _aider_cost(cost.group(2)) if cost else None
        self._summed = (self._summed or Usage()).add(message)
        if session_cost is not None:
            self._cost = session_cost
        self.turns += 1
        return True

    def usage(self) -> Usage | None:
        """What the session spent so far, or None when nothing said so; unknown (saying why)
        once a number it printed was not believed."""
        if self.doubt is not None:
            return Usage.unknown(self.doubt)
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
        whole = loads(text)  # one JSON value over many lines (gemini json, claude json --verbose)
    except (ValueError, RecursionError):  # lines, each read (and doubted) on its own
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
