"""The environment an agent's processes get: an allowlist, never the user's whole environment.

An agent CLI (and every command an API agent runs with `run_command`) sees, of the user's
variables, only:

- `PATH`, the locale (`LANG`, `LANGUAGE`, `LC_*`, `TZ`), the terminal (`TERM`, `COLORTERM`,
  `NO_COLOR`, `FORCE_COLOR`, `CLICOLOR*`, `COLUMNS`, `LINES`) and who and where the user is
  (`USER`, `LOGNAME`, `SHELL`);
- how Python runs (`PYTHON*`: `PYTHONPATH`, `PYTHONDONTWRITEBYTECODE`, ...), where programs and
  their certificates are (`VIRTUAL_ENV`, `NODE_PATH`,
  `JAVA_HOME`, `GOPATH`, `GOROOT`, `CARGO_HOME`, `RUSTUP_HOME`, `SSL_CERT_FILE`, ...): no
  secrets, and the agent's own `specflux` needs them in a checkout or a virtualenv;
- `SPECFLUX_*`;
- what its preset names (`Preset.passes`: its model's API key and base URL, `ANTHROPIC_API_KEY`
  for Claude Code, say);
- without a sandbox only: the real `HOME`, `TMPDIR` and `XDG_*_HOME` (a sandbox gives private
  ones), and the proxy variables while the network is not confined (a confined network gets the
  engine's own proxy instead: `egress.py`).

Anything else reaches an agent only through `[agents.NAME] env` in `.specflux/config.toml`, where
a value that is all `$NAME` or `${NAME}` passes the user's variable NAME on (and is left out when
NAME is not set). So `SSH_AUTH_SOCK`, `GIT_ASKPASS` and git's other credential settings, and any
`*_TOKEN` the user did not hand over, stay out, with a sandbox and without (`--no-sandbox` too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

PASSED = frozenset((
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
    "CLICOLOR_FORCE", "COLUMNS", "LINES", "USER", "LOGNAME", "SHELL",
    "VIRTUAL_ENV", "NODE_PATH", "JAVA_HOME", "GOPATH", "GOROOT", "CARGO_HOME", "RUSTUP_HOME",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
))
PREFIXES = ("LC_", "SPECFLUX_", "PYTHON")  # PYTHON*: PYTHONPATH, PYTHONDONTWRITEBYTECODE, ...
# The user's own folders: passed only where no sandbox gives the agent private ones.
UNCONFINED = ("HOME", "TMPDIR", "TMP", "TEMP", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
              "XDG_STATE_HOME")
PROXY = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
         "no_proxy")

_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def allowed(name: str, passes: Iterable[str] = ()) -> bool:
    """Whether the user's variable `name` is on the allowlist, with the preset's `passes` (names,
    or prefixes ending in `*`)."""
    if name in PASSED or name.startswith(PREFIXES):
        return True
    for entry in passes:
        if name == entry or (entry.endswith("*") and name.startswith(entry[:-1])):
            return True
    return False


def agent_env(user: Mapping[str, str], passes: Iterable[str] = (), given: Mapping[str, str] | None = None,
              private: Mapping[str, str] | None = None, network_confined: bool = False) -> dict[str, str]:
    """The environment of an agent's process.

    `user`: the user's environment (`os.environ`), of which only the allowed variables pass, with
    the preset's `passes`; `given`: values set for the agent (the preset's and `[agents.NAME]`'s
    `env`, whose `$NAME` values are the user's NAME, and the engine's `SPECFLUX_*`); `private`:
    what the sandbox gives (its HOME, XDG and temporary folders; the proxy of a confined network),
    which wins over everything. Without `private` HOME, the user's folders pass; without a
    confined network, the user's proxy variables do.
    """
    passes = tuple(passes)
    env = {k: v for k, v in user.items() if allowed(k, passes)}
    private = dict(private or {})
    if "HOME" not in private:
        env.update({k: user[k] for k in UNCONFINED if k in user})
    if not network_confined:
        env.update({k: user[k] for k in PROXY if k in user})
    for key, value in (given or {}).items():
        reference = _REFERENCE.fullmatch(value)
        if reference is None:
            env[key] = value
            continue
        name = reference.group(1) or reference.group(2)
        if name in user:
            env[key] = user[name]
        else:
            env.pop(key, None)
    env.update(private)
    return env
