"""`.specflux/config.toml`: thresholds and agent settings, with the seed's defaults."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any, ClassVar, Mapping

from specflux.base.errors import ParseError
from specflux.base.records import Factory, field_names, record


def kb(size: int) -> str:
    return f"{size / 1024:.1f} KB" if size < 10 * 1024 else f"{size / 1024:.0f} KB"


@record(frozen=True)
class ArchiveConfig:
    warn_kb: float = 50
    archive_kb: float = 75
    keep_sessions: int = 5
    suggest_split_sessions: int = 20

    def warnings(self, size: int, sessions: int) -> list[str]:
        """The size warning and the decomposition suggestion, where they apply."""
        out = []
        if size > self.warn_kb * 1024:
            out.append(f"{kb(size)}, past the {self.warn_kb:g} KB warning size")
        if sessions > self.suggest_split_sessions:
            out.append(f"{sessions} sessions: consider splitting this task into smaller ones")
        return out


@record(frozen=True)
class AgentConfig:
    model: str = "claude-sonnet-5-5"
    max_turns: int = 40
    token_budget: int = 400_000
    max_tokens: int = 8192
    command_timeout_s: float = 120
    session_timeout_s: float = 3600
    sandbox: str = "auto"  # what confines run_command's writes (specflux.agent.sandbox.choose)

    # The values a setting may take. Repeats sandbox.SETTINGS (a test checks): importing the
    # sandbox here would load ctypes for every command.
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"sandbox": ("auto", "off", "landlock", "bwrap", "sandbox-exec")}


@record(frozen=True)
class FlowConfig:
    """`[flow]`: workflow runs. `worktree_setup` is run (by the shell, in the worktree) in every
    worktree a parallel run creates, before the agent starts: installing dependencies, say."""

    worktree_setup: str = ""
    worktree_setup_timeout_s: float = 900
    parallel: int = 1  # lanes when `flow start` is not given --parallel
    max_iterations: int = 0  # steps per run; 0: derived from the run (flow/limits.py)
    token_budget: int = 20_000_000  # tokens per run (input, output and cache writes: Usage.budgeted); 0: none
    stall_rounds: int = 3  # coder rounds in a row without a change that end a run as stalled; 0: never
    budget_usd: float = 0.0  # US dollars per run (agent/pricing.py turns tokens into money); 0: none


@record(frozen=True)
class RemoteConfig:
    """`[remote]`: workers sharing one queue through a git remote (`flow start --remote`)."""

    lease_s: float = 60  # a claim's lease; renewed every third of it while the agent works
    skew_s: float = 5  # how far machines' clocks may disagree: a lease is stale this long after it ends
    poll_s: float = 1  # how often a worker with nothing ready looks again while others hold claims
    give_up_s: float = 3600  # how long a worker waits for an unreachable remote before it gives up


@record(frozen=True)
class AgentEntry:
    """`[agents.NAME]`: an agent CLI of the user's own, run as `--agent NAME` (agent/presets.py)."""

    command: str  # the headless command line; {prompt}, {prompt_file}, {model} are filled in
    context: str = "stdin"  # where the context goes: stdin, arg (one argument) or file ({prompt_file})
    usage: str = "auto"  # whose output the usage is read from (agent/usage_readers.py), "auto" tries each
    install: str = ""  # said when the command is not on PATH
    model: str = ""  # the part naming a model (`--model {model}`), used when --model is given
    roles: Mapping[str, str] = Factory(dict)  # more of the command line for coder/reviewer/planner
    env: Mapping[str, str] = Factory(dict)


AGENT_CONTEXTS = ("stdin", "arg", "file")
AGENT_ROLES = ("coder", "reviewer", "planner")
RESERVED_AGENTS = ("anthropic", "command", "replay")


@record(frozen=True)
class Config:
    archive: ArchiveConfig = Factory(ArchiveConfig)
    agent: AgentConfig = Factory(AgentConfig)
    commit: bool = True
    validate: "ValidateConfig | None" = None  # the test command of workflow runs; None: none set
    flow: FlowConfig = Factory(FlowConfig)
    remote: RemoteConfig = Factory(RemoteConfig)
    pricing: Mapping[str, Mapping[str, float]] = Factory(dict)  # model -> rates over the shipped table
    agents: Mapping[str, AgentEntry] = Factory(dict)  # [agents.NAME]: the user's own agent CLIs


def _section(cls, data: dict[str, Any], path: Path, name: str, text: str = ""):
    known = field_names(cls)
    unknown = set(data) - set(known)
    if unknown:
        raise ParseError(f"unknown setting(s) in [{name}]: {', '.join(sorted(unknown))}", path,
                         _line_of(text, name, min(unknown)))
    defaults = cls()
    choices = getattr(cls, "choices", {})
    for key, value in data.items():
        want = type(getattr(defaults, key))
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) if want in (int, float) else isinstance(value, want)
        if not ok:
            raise ParseError(f"[{name}] {key} must be a {want.__name__}, not {value!r}", path, _line_of(text, name, key))
        if key in choices and value not in choices[key]:
            raise ParseError(f"[{name}] {key} must be one of {', '.join(choices[key])}, not {value!r}", path,
                             _line_of(text, name, key))
    return cls(**data)


def _line_of(text: str, section: str, key: str) -> int | None:
    """The line setting `key` in `[section]` (plain keys; None where it cannot be told)."""
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1)
        elif current == section and re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


_READ: dict[str, tuple[str, Config]] = {}  # path -> (its text, its Config): the last read of each file


def load_config(path: Path) -> Config:
    """Read the config file; a missing file gives the defaults, a broken one a located error.

    A process reads one file many times (each TaskStateManager, run and worker has a workspace of
    its own: ~6 in a worker before its first agent); a text read before gives the Config made of it
    (a frozen record with read-only mappings), without parsing it again (~2 ms a parse)."""
    if not path.is_file():
        return Config()
    text = path.read_text(encoding="utf-8")
    if text == DEFAULT_CONFIG:  # as `specflux init` wrote it: the defaults, without tomllib (~3 ms)
        return Config()
    key = str(path)
    if key in _READ and _READ[key][0] == text:
        return _READ[key][1]
    config = _parse(path, text)
    _READ[key] = (text, config)
    return config


def _parse(path: Path, text: str) -> Config:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = getattr(e, "lineno", None)
        raise ParseError(f"config is not valid TOML: {e}", path, line) from None
    unknown = set(data) - {"archive", "agent", "git", "validate", "flow", "remote", "pricing", "agents"}
    if unknown:
        raise ParseError(f"unknown section(s): {', '.join(sorted(unknown))}", path)
    git = data.get("git", {})
    return Config(
        archive=_section(ArchiveConfig, data.get("archive", {}), path, "archive", text),
        agent=_section(AgentConfig, data.get("agent", {}), path, "agent", text),
        commit=bool(git.get("commit", True)),
        validate=_validate_section(data.get("validate"), path, text),
        flow=_section(FlowConfig, data.get("flow", {}), path, "flow", text),
        remote=_section(RemoteConfig, data.get("remote", {}), path, "remote", text),
        pricing=_pricing_section(data.get("pricing", {}), path, text),
        agents=_agents_section(data.get("agents", {}), path, text),
    )


def _agents_section(data: Any, path: Path, text: str) -> dict[str, AgentEntry]:
    """`[agents.NAME]` tables, each an AgentEntry; a mistake is located and refused."""
    out: dict[str, AgentEntry] = {}
    for name, entry in (data if isinstance(data, Mapping) else {"": None}).items():
        where = f"agents.{name}"
        if not isinstance(entry, Mapping):
            raise ParseError(f"[{where}] must be a table with a command", path)
        if name in RESERVED_AGENTS:
            raise ParseError(f"[{where}]: {name} is a built-in --agent; give your agent another name", path,
                             _line_of_table(text, where))
        known = set(field_names(AgentEntry))
        unknown = sorted(set(entry) - known)
        if unknown:
            raise ParseError(f"unknown setting(s) in [{where}]: {', '.join(unknown)} (known: {', '.join(sorted(known))})",
                             path, _line_of(text, where, unknown[0]))
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ParseError(f'[{where}] needs a command, e.g. command = "my-agent --headless"', path,
                             _line_of(text, where, "command") or _line_of_table(text, where))
        for key in ("context", "usage", "install", "model"):
            if key in entry and not isinstance(entry[key], str):
                raise ParseError(f"[{where}] {key} must be a string, not {entry[key]!r}", path, _line_of(text, where, key))
        if entry.get("context", "stdin") not in AGENT_CONTEXTS:
            raise ParseError(f"[{where}] context must be one of {', '.join(AGENT_CONTEXTS)}, not {entry['context']!r}",
                             path, _line_of(text, where, "context"))
        for key, allowed in (("roles", AGENT_ROLES), ("env", None)):
            table = entry.get(key, {})
            if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()) or \
                    (allowed and set(table) - set(allowed)):
                what = f"roles ({', '.join(allowed)})" if allowed else "names"
                raise ParseError(f"[{where}] {key} must be a table of strings by {what}", path,
                                 _line_of(text, where, key))
        out[name] = AgentEntry(**entry)
    return out


def _line_of_table(text: str, table: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*\[\s*{re.escape(table)}\s*\]", line):
            return number
    return None


PRICING_RATES = ("input", "output", "cache_read", "cache_write")  # US dollars per million tokens


def _pricing_section(data: Any, path: Path, text: str) -> dict[str, dict[str, float]]:
    """`[pricing."model"]` tables: rates over the pricing table shipped with specflux."""
    out: dict[str, dict[str, float]] = {}
    for model, rates in (data if isinstance(data, Mapping) else {"": None}).items():
        where = f'pricing."{model}"'
        if not isinstance(rates, Mapping):
            raise ParseError(f"[{where}] must be a table of {', '.join(PRICING_RATES)}", path)
        unknown = sorted(set(rates) - set(PRICING_RATES))
        if unknown:
            raise ParseError(f"unknown rate(s) in [{where}]: {', '.join(unknown)} (rates: {', '.join(PRICING_RATES)})",
                             path, _line_of(text, where, unknown[0]))
        for key, value in rates.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ParseError(f"[{where}] {key} must be US dollars per million tokens, not {value!r}", path,
                                 _line_of(text, where, key))
        out[model] = {k: float(v) for k, v in rates.items()}
    return out


def _validate_section(data: Any, path: Path, text: str) -> "ValidateConfig | None":
    """`[validate]`, read by the flow package; imported only when present, so that commands on a
    workspace without one (`list`, `show`) load nothing of workflow runs."""
    return load_validate_config(data, path, text)


# --- [validate] ---------------------------------------------------------------------------


@record(frozen=True)
class ValidateConfig:
    """The `[validate]` table of config.toml; relative paths are relative to the repository."""

    command: str
    junit_xml: str | None = None
    coverage_json: str | None = None
    timeout_s: float = 900


def load_validate_config(data: Mapping | None, path: Path, text: str = "") -> ValidateConfig | None:
    """The `[validate]` table as a ValidateConfig, or None when there is none.

    `path` is config.toml (named in every error); `text` its content, used only to give the line of
    a bad key. A typo such as `junit = ...` is refused rather than ignored: an ignored junit path
    would silently turn "the report says" into "the exit code says".
    """
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ParseError(f"[validate] must be a table, not {data!r}", path, _line_of_section(text))
    known = {"command", "junit_xml", "coverage_json", "timeout_s"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ParseError(f"unknown setting(s) in [validate]: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})", path, _validate_line_of(text, unknown[0]))
    if "command" not in data:
        raise ParseError("[validate] needs a command, e.g. command = \"python -m pytest -q\"", path,
                         _line_of_section(text))
    for key in ("command", "junit_xml", "coverage_json"):
        value = data.get(key)
        if key in data and (not isinstance(value, str) or not value.strip()):
            raise ParseError(f"[validate] {key} must be a non-empty string, not {value!r}", path,
                             _validate_line_of(text, key))
    timeout = data.get("timeout_s", ValidateConfig.timeout_s)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ParseError(f"[validate] timeout_s must be a positive number of seconds, not {timeout!r}", path,
                         _validate_line_of(text, "timeout_s"))
    return ValidateConfig(command=data["command"], junit_xml=data.get("junit_xml"),
                          coverage_json=data.get("coverage_json"), timeout_s=float(timeout))


def _validate_line_of(text: str, key: str) -> int | None:
    return _line_of(text, "validate", key)


def _line_of_section(text: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"\s*\[\s*validate\s*\]", line) or re.match(r"\s*validate\s*=", line):
            return number
    return None


DEFAULT_CONFIG = """\
# specflux settings. Every key is optional; these are the defaults.

[archive]
warn_kb = 50                 # list and lint warn past this size
archive_kb = 75              # older sessions move to .specflux/archives/ past this size
keep_sessions = 5            # sessions kept in full when archiving
suggest_split_sessions = 20  # suggest decomposing a task past this many sessions

[agent]
model = "claude-sonnet-5-5"
max_turns = 40
token_budget = 400000        # input, output and cache-write tokens per session (cache reads are not counted)
max_tokens = 8192            # per response
command_timeout_s = 120      # run_command default timeout
sandbox = "auto"             # run_command may write only in the repository (not .git/ or .specflux/)
                             # and a temp folder: "auto" (bwrap, else Landlock, else sandbox-exec;
                             # says so when none is available), "bwrap", "landlock", "sandbox-exec",
                             # or "off" (unconfined, and no warning)

[git]
commit = true                # commit every session; --no-commit skips one

# The test command workflow runs (`specflux flow`) run after the coder: its exit code and report,
# not the agent's word, say whether the tests pass. Without it the coder's own claim stands.
# [validate]
# command = "python -m pytest -q --junitxml=.specflux-junit.xml"  # run in the repository root
# junit_xml = ".specflux-junit.xml"   # optional: failed tests and pass rate come from it
# coverage_json = "coverage.json"     # optional: coverage from `coverage json` output
# timeout_s = 900                     # the command and its children are killed after this

# Parallel runs (`specflux flow start --parallel N`) give each coder attempt its own git worktree;
# this command prepares each one before the agent starts (run by the shell, in the worktree).
# Every run is finite even where the workflow sets no max_iterations:
# [flow]
# worktree_setup = "npm ci"
# worktree_setup_timeout_s = 900
# max_iterations = 0         # steps per run; 0: the run's tasks x the steps its workflow allows each
# token_budget = 20000000    # tokens per run (input, output, cache writes); --token-budget overrides
# stall_rounds = 3           # a task going round this often with no change in tree, tests or review
#                            # issues ends the run as stalled; 0: never
# budget_usd = 0             # US dollars per run (priced by the table below); --budget-usd overrides

# What a model costs, in US dollars per million tokens, over the table shipped with specflux
# (specflux/agent/pricing.toml, dated; `specflux stats` says its date):
# [pricing."claude-sonnet-4-5"]
# input = 3.0
# output = 15.0
# cache_read = 0.3
# cache_write = 3.75
"""
