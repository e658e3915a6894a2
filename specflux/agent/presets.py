"""Agent CLI presets: how specflux runs a known coding-agent CLI headless, for every role of a run.

`--agent claude` (or codex, gemini, ...) names a `Preset`; `--agent command --cmd "..."` is the
same machinery with a command line of the user's own, and `[agents.NAME]` in
`.specflux/config.toml` adds presets of the user's own (`from_config`). A preset says:

- `program`, `install`: the executable looked up on PATH, and the one line telling a user who
  has not got it how to install it (a missing CLI is that line and exit 1, before anything runs);
- `command`: the headless invocation, a shell command line (`program` first) in which the
  placeholders `{prompt}`, `{prompt_file}` and `{model}` are replaced by shell-quoted values;
- `roles`: more of the command line for a role (`coder`, `reviewer`, `planner`): typically the
  tools the CLI may use (a reviewer and a planner read and run `specflux submit-review` /
  `submit-tasks`; a coder also edits);
- `model`: the part of the command line naming a model (`--model {model}`), used only when the
  user named one (`--model`); otherwise the CLI's own default model;
- `handover`: where the session's instructions and task context go: `stdin`, `arg` (one
  argument: `{prompt}` where the command says, else at the end; a context too long for one
  argument becomes a short prompt pointing at the file) or `file` (`{prompt_file}`, else the path
  at the end). The file is written in every case; SPECFLUX_PROMPT_FILE names it;
- `usage`: the name of the reader of what the CLI prints (tokens, turns, its result), a kind of
  `specflux.agent.usage_readers`; "auto" tries each;
- `env`: environment the CLI needs (switching off telemetry and self-updates, say);
- `passes`: the user's variables the CLI gets (its model's API key and base URL: names, or
  prefixes ending in `*`); of the rest of the user's environment it sees only the allowlist of
  `specflux.agent.environment` (PATH, locale, terminal, `SPECFLUX_*`);
- `hosts`: where its model's API is (host names, `*.domain` for any below it): what a confined
  network lets it reach, with the hosts of the URLs among the `passes` (a base URL);
- `home`: files and folders under HOME the CLI reads its login and settings from. A sandboxed
  agent CLI runs with HOME a private temporary folder (its writes stay there), into which these
  are copied first;
- `verified`: the version of the real CLI the tests ran it against ("" when none did).

The session ends when the CLI exits: a headless CLI stops when its model ends its turn.

To add a preset: add a `Preset(...)` to `PRESETS` below (its name is then an `--agent` choice
everywhere: `run`, `plan`, `flow start`); check it against the real CLI in `tests/agent/` (a
scripted model server the CLI talks to, as `tests/agent/test_claude_code.py` does for Claude
Code), and add its row to the README's table of presets.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Literal, Mapping

from specflux.base.records import Factory, record

Handover = Literal["stdin", "arg", "file"]
HANDOVERS: tuple[str, ...] = ("stdin", "arg", "file")
ROLES: tuple[str, ...] = ("coder", "reviewer", "planner")
BACKENDS: tuple[str, ...] = ("anthropic", "command", "replay")  # the --agent names that are no preset

# Linux refuses one argument longer than 128 KiB (MAX_ARG_STRLEN); stay well below it.
ARG_LIMIT = 100_000

# Words that make the shell, not a program, the first thing to run: too shell-ish to judge.
_SHELL_WORDS = frozenset(
    "! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while "
    ". : [ alias bg break builtin cd command continue declare eval exec exit export false fg getopts hash "
    "jobs kill let local printf pwd read readonly return set shift source test times trap true type "
    "typeset ulimit umask unalias unset wait".split()
)
_SHELL_META = re.compile(r"[$`;&|<>(){}*?\[\]#\\]")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)


@record(frozen=True)
class Preset:
    """How one agent CLI runs headless (see the module's docstring)."""

    name: str
    program: str
    command: str
    install: str = ""
    roles: Mapping[str, str] = Factory(dict)
    model: str = ""
    handover: Handover = "stdin"
    usage: str = "auto"
    env: Mapping[str, str] = Factory(dict)
    home: tuple[str, ...] = ()
    verified: str = ""
    passes: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()

    def command_line(self, role: str, prompt: str, prompt_file: str, model: str | None = None) -> str:
        """The shell command line running this CLI for `role`, its context handed over as the
        preset says (`prompt` is the whole of it, already written to `prompt_file`)."""
        line = " ".join(part for part in (self.command, self.roles.get(role, ""),
                                          self.model if model and self.model else "") if part)
        values = {"{model}": model or "", "{prompt_file}": prompt_file}
        if self.handover == "arg":
            values["{prompt}"] = prompt if len(prompt.encode()) <= ARG_LIMIT else pointer(prompt_file, prompt)
            if "{prompt}" not in line:
                line += " {prompt}"
        elif self.handover == "file" and "{prompt_file}" not in line:
            line += " {prompt_file}"
        return substitute(line, values)

    def stdin(self, prompt: str) -> bytes:
        """What the CLI reads on standard input: the context, or nothing (it is elsewhere)."""
        return prompt.encode() if self.handover == "stdin" else b""

    def missing(self, path_var: str | None = None) -> str | None:
        """The one line saying what to install, when `program` is not on PATH; else None."""
        import shutil

        if "/" in self.program or shutil.which(self.program, path=path_var) is not None:
            return None
        how = f": {self.install}" if self.install else ""
        return f"--agent {self.name} needs the `{self.program}` command, which is not on PATH; install it{how}"


def pointer(prompt_file: str, prompt: str) -> str:
    """The prompt argument standing for a context too long to be one argument."""
    return (f"Your instructions and the task context are in the file {prompt_file} "
            f"({len(prompt.encode())} bytes, too long for an argument). Read all of it first, then follow it.")


def substitute(line: str, values: Mapping[str, str]) -> str:
    """`line` with each placeholder replaced by its value, shell-quoted (only the placeholders
    named: other braces, such as JSON in a command line, stay as written)."""
    for placeholder, value in values.items():
        line = line.replace(placeholder, shlex.quote(value))
    return line


# --------------------------------------------------------------------- the built-in presets

# The model providers aider and opencode can talk to: their variables and their APIs' hosts.
_PROVIDER_VARIABLES = ("OPENAI_*", "ANTHROPIC_*", "GEMINI_*", "GOOGLE_*", "OPENROUTER_*", "DEEPSEEK_*", "GROQ_*",
                       "MISTRAL_*", "XAI_*", "OLLAMA_*")
_PROVIDER_HOSTS = ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com", "openrouter.ai",
                   "api.deepseek.com", "api.groq.com", "api.mistral.ai", "api.x.ai")

_CLAUDE_READ = "Read,Glob,Grep,Bash"
_CLAUDE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports or update checks
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}

CLAUDE = Preset(
    name="claude",
    program="claude",
    install="npm install -g @anthropic-ai/claude-code (https://docs.anthropic.com/en/docs/claude-code)",
    # -p: headless, the prompt on stdin; stream-json (which needs --verbose with -p) prints each
    # message as it comes and the result with its usage last. acceptEdits and --allowedTools: the
    # tools the role may use run without asking (bypassPermissions is refused to root).
    command="claude -p --output-format stream-json --verbose --permission-mode acceptEdits --strict-mcp-config",
    roles={
        "coder": "--tools Read,Glob,Grep,Bash,Edit,Write --allowedTools Read,Glob,Grep,Bash,Edit,Write",
        "reviewer": f"--tools {_CLAUDE_READ} --allowedTools {_CLAUDE_READ}",
        "planner": f"--tools {_CLAUDE_READ} --allowedTools {_CLAUDE_READ}",
    },
    model="--model {model}",
    handover="stdin",
    usage="claude",
    env=_CLAUDE_ENV,
    home=(".claude.json", ".claude/.credentials.json", ".claude/settings.json"),
    verified="2.1.332",
    passes=("ANTHROPIC_*", "CLAUDE_CODE_*", "DISABLE_*"),
    hosts=("api.anthropic.com", "console.anthropic.com", "platform.claude.com", "claude.ai"),
)

# Codex, Gemini CLI, aider and opencode: each checked against its real CLI in
# tests/agent/test_cli_presets.py (a scripted OpenAI or Gemini server on 127.0.0.1).

CODEX = Preset(
    name="codex",
    program="codex",
    install="npm install -g @openai/codex (https://github.com/openai/codex)",
    # exec: headless, the prompt on stdin; --json prints its events, `turn.completed` with the
    # usage. Codex's own sandbox is off: specflux's (confine.py) is the one around it, and Codex's
    # cannot write inside it (bubblewrap within bubblewrap: "Failed to write file"). Its
    # commands run with allow_login_shell=false: they inherit specflux's environment (a login
    # shell's profile may drop `specflux` from PATH). No per-tool switch: a reviewer's changes
    # are put back.
    command="codex exec --json --skip-git-repo-check --ephemeral --dangerously-bypass-approvals-and-sandbox "
            "-c allow_login_shell=false",
    roles={},
    model="--model {model}",
    handover="stdin",
    usage="codex",
    home=(".codex/config.toml", ".codex/auth.json"),
    verified="0.171.0",
    passes=("OPENAI_*", "CODEX_*"),
    hosts=("api.openai.com", "chatgpt.com", "auth.openai.com"),
)

_GEMINI_READ = "read_file,read_many_files,list_directory,glob,grep_search,run_shell_command"

GEMINI = Preset(
    name="gemini",
    program="gemini",
    install="npm install -g @google/gemini-cli (https://github.com/google-gemini/gemini-cli)",
    # Headless when its stdin is not a terminal (the prompt); --output-format json prints one
    # object, `stats` with the tokens per model. --skip-trust: no question about trusting the
    # folder. A coder runs in yolo mode (every tool); a reviewer and a planner get the read tools
    # and the shell (for `specflux submit-review` / `submit-tasks`) and nothing that edits.
    command="gemini --output-format json --skip-trust",
    roles={
        "coder": "--approval-mode yolo",
        "reviewer": f"--approval-mode default --allowed-tools {_GEMINI_READ}",
        "planner": f"--approval-mode default --allowed-tools {_GEMINI_READ}",
    },
    model="--model {model}",
    handover="stdin",
    usage="gemini",
    home=(".gemini/settings.json", ".gemini/oauth_creds.json", ".gemini/google_accounts.json",
          ".gemini/installation_id", ".gemini/GEMINI.md"),
    verified="0.61.0",
    passes=("GEMINI_*", "GOOGLE_*"),
    hosts=("generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com",
           "*.aiplatform.googleapis.com"),
)

_AIDER_NOTE = ("Note: each line of a shell block you suggest runs as a command of its own, so hand in on one "
               "line, the JSON echoed into it: echo {JSON} | specflux submit-review --json - "
               "(or specflux submit-tasks --json -).")

AIDER = Preset(
    name="aider",
    program="aider",
    install="python -m pip install aider-install && aider-install (https://aider.chat/docs/install.html)",
    # --message-file /dev/stdin: one message, the context, then aider exits. Its questions (add a
    # file it names to the chat, run the shell command it suggests, ...) meet the end of stdin and
    # take their default answer, yes: --yes-always would say no to shell commands, and then no
    # `specflux` command could run. specflux commits, not aider; no analytics, update checks,
    # release notes or URL fetching; the repository map is off (its cache, .aider.tags.cache.v4/,
    # would land in the repository and the session's commit), and the chat history goes nowhere.
    # --no-stream: the tokens it prints are then the API's count, not its own estimate. aider runs
    # each line of a shell block as a command of its own (a heredoc breaks), so the context it
    # reads ends with a note saying to hand in on one line.
    command=f"{{ cat; printf '\\n\\n%s\\n' '{_AIDER_NOTE}'; }} | "
            "aider --message-file /dev/stdin --no-pretty --no-stream --no-fancy-input --no-auto-commits "
            "--no-dirty-commits --no-gitignore --no-check-update --no-analytics --no-show-release-notes "
            "--no-show-model-warnings --no-detect-urls --map-tokens 0 --chat-history-file /dev/null "
            "--input-history-file /dev/null",
    roles={},
    model="--model {model}",
    handover="stdin",
    usage="aider",
    home=(".aider.conf.yml", ".aider.model.settings.yml", ".aider.model.metadata.json", ".env",
          ".aider/caches/model_prices_and_context_window.json"),  # kept a day: not fetched every session
    verified="0.86.2",
    passes=("AIDER_*", *_PROVIDER_VARIABLES),
    hosts=_PROVIDER_HOSTS,
)

OPENCODE = Preset(
    name="opencode",
    program="opencode",
    install="npm install -g opencode-ai (https://opencode.ai/docs)",
    # run: headless, the prompt on stdin; --format json prints its events, each `step_finish` with
    # tokens and cost; --title: no model request to name the session. --auto approves what its
    # agent would ask about; a reviewer and a planner run its `plan` agent, which may not edit.
    command="opencode run --format json --title specflux --auto",
    roles={"reviewer": "--agent plan", "planner": "--agent plan"},
    model="--model {model}",
    handover="stdin",
    usage="opencode",
    env={"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"},
    home=(".config/opencode/opencode.json", ".config/opencode/opencode.jsonc", ".local/share/opencode/auth.json"),
    verified="1.18.33",
    passes=("OPENCODE_*", *_PROVIDER_VARIABLES),
    hosts=(*_PROVIDER_HOSTS, "models.dev"),
)

PRESETS: dict[str, Preset] = {preset.name: preset for preset in (CLAUDE, CODEX, GEMINI, AIDER, OPENCODE)}


# --------------------------------------------------------------------- choosing one


def names() -> list[str]:
    """Every built-in --agent name: the backends, then the presets."""
    return [*BACKENDS, *PRESETS]


class AgentNames:
    """The CLI's --agent choices: offered (in help and completion) are the built-in names; any
    name is taken, since config.toml may add its own (`resolve` refuses an unknown one)."""

    def __iter__(self):
        return iter(names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(name)


def agent_help() -> str:
    """The --agent option's help."""
    return (f"anthropic (the Messages API, default), an agent CLI ({', '.join(PRESETS)}), one of your "
            "[agents.NAME] in config.toml, command (with --cmd) or replay (a recording)")


def is_command_agent(kind: str) -> bool:
    """Whether `--agent kind` runs an agent CLI (a preset, a user's own, or `command`)."""
    return kind not in ("anthropic", "replay")


def resolve(kind: str, cmd: str | None = None, agents: Mapping[str, object] | None = None) -> Preset:
    """The preset `--agent kind` names: a built-in, one of `[agents.NAME]` in config.toml
    (`agents`, as store.config reads them: a user's own wins over a built-in of the same name),
    or for `command` the user's `cmd`. UsageError for anything else."""
    from specflux.base.errors import UsageError

    if kind == "command":
        if not cmd:
            raise UsageError('--agent command needs --cmd "the agent command line"')
        return command_preset(cmd)
    if cmd:
        raise UsageError(f"--cmd is for --agent command; --agent {kind} has its own command line "
                         f"(add your own as [agents.NAME] in .specflux/config.toml)")
    own = (agents or {}).get(kind)
    if own is not None:
        return from_config(kind, own)
    if kind in PRESETS:
        return PRESETS[kind]
    known = [*names(), *sorted(agents or {})]
    raise UsageError(f"unknown agent {kind!r}; choose one of {', '.join(dict.fromkeys(known))}, "
                     "or add [agents." + kind + "] to .specflux/config.toml")


def installed(preset: Preset, path_var: str | None = None) -> Preset:
    """`preset`, or AgentError (the one line saying what to install) when its CLI is not on
    PATH: said before a run is created, not as the error of its first step."""
    from specflux.agent.usage_readers import KINDS
    from specflux.base.errors import AgentError

    if preset.usage not in KINDS:
        raise AgentError(f"--agent {preset.name}: usage = {preset.usage!r} names no reader of agent CLIs' "
                         f"output (readers: {', '.join(KINDS)})")
    problem = preset.missing(path_var) if preset.name != "command" and preset.program else None
    if problem:
        raise AgentError(problem)
    return preset


def command_preset(cmd: str) -> Preset:
    """`--agent command --cmd CMD`: the context on stdin, usage read however the output says."""
    found = program_of(cmd)
    return Preset(name="command", program=found[0] if found else "", command=cmd)


def from_config(name: str, entry: object) -> Preset:
    """A preset from `[agents.NAME]` (a store.config.AgentEntry: command, context, usage,
    install, model, roles, env)."""
    command = getattr(entry, "command")
    found = program_of(command)
    return Preset(name=name, program=found[0] if found else "", command=command,
                  install=getattr(entry, "install", ""), roles=dict(getattr(entry, "roles", {}) or {}),
                  model=getattr(entry, "model", ""), handover=getattr(entry, "context", "stdin"),
                  usage=getattr(entry, "usage", "auto"), env=dict(getattr(entry, "env", {}) or {}))


def home_sources(preset: Preset, home: str | None = None) -> list[tuple[str, str]]:
    """(path under the real HOME, the same path relative to HOME) for each of the preset's `home`
    files that exists: what a private HOME gets a copy of."""
    home = home or os.path.expanduser("~")
    return [(os.path.join(home, rel), rel) for rel in preset.home if os.path.exists(os.path.join(home, rel))]


def program_of(cmd: str) -> tuple[str, dict[str, str]] | None:
    """The program a shell command line starts, with the variables it assigns first; None when
    the line is too shell-ish to tell (a keyword or builtin, an expansion, a redirection first)."""
    try:
        words = shlex.split(cmd)
    except ValueError:  # unbalanced quotes: let the shell say what it thinks
        return None
    assigned: dict[str, str] = {}
    for word in words:
        assignment = _ASSIGNMENT.fullmatch(word)
        if assignment:
            if _SHELL_META.search(word) or assignment.group(1) == "PATH":
                return None
            assigned[assignment.group(1)] = assignment.group(2)
            continue
        if word in _SHELL_WORDS or _SHELL_META.search(word):
            return None
        return os.path.expanduser(word), assigned
    return None
