"""Shared test set-up: no test reaches the network, every git repo has an identity."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

# A suite started with SIGINT ignored (`pytest &` from a script) would pass that on to every process it
# starts, and the tests that press Ctrl-C on a run would find it ignored (as specflux rightly keeps it):
# the processes the tests start get SIGINT as a terminal gives it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
CORPUS = SHARED / "corpus"

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if not _is_local(address):
        raise RuntimeError(f"tests must not reach the network (tried to connect to {address!r})")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _is_local(address):
        raise RuntimeError(f"tests must not reach the network (tried to connect to {address!r})")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if host not in (None, "localhost") and not _is_local((host, 0)):
        raise RuntimeError(f"tests must not reach the network (tried to resolve {host!r})")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Refuse every connection that is not to this machine."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("SPECFLUX_ROOT", raising=False)
    # The suite's fake agent CLIs keep their plans and notes outside the repository: unconfined,
    # unless a test asks for the sandbox (tests/agent/test_cli_sandbox.py, test_claude_code.py).
    monkeypatch.setenv("SPECFLUX_CLI_SANDBOX", "off")
    # The projects the tests make validate with real pytest, and need none of the plugins this
    # environment has installed (xdist, hypothesis, anyio; langsmith with the bench extra): loading
    # them took each validation 0.5-2 s more here, over the hundreds of validations in the suite.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


# The same for fixtures made once per module or session (before any test's monkeypatch runs).
os.environ["SPECFLUX_CLI_SANDBOX"] = "off"
# The engine's state of workspaces outside git (store/state_dir.py) goes to a folder of the
# suite's own, never to the user's ~/.local/state.
if "SPECFLUX_STATE_HOME" not in os.environ:
    import tempfile

    os.environ["SPECFLUX_STATE_HOME"] = tempfile.mkdtemp(prefix="specflux-test-state-")


_SHORT_BASE = pytest.StashKey[str]()
_STARTED = pytest.StashKey[float]()


def _bytecode_for_what_tests_start(config) -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (images often set it), every process the suite starts
    (hundreds of specflux commands, agents, merge drivers) compiled each module it imports again, a
    clean clone having no __pycache__: tests/flow/test_kill_points.py took 2.6x as long. They write
    their bytecode to a folder of the suite's own instead (PYTHONPYCACHEPREFIX, removed at the end),
    and the checkout stays free of __pycache__, as the setting meant. Not pytest-xdist's controller:
    its workers start as it did (reading the installed packages' bytecode where it is), and each
    points its own children at the folder."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    folder = os.environ.get("SPECFLUX_TEST_BYTECODE")
    if not folder:  # the run's first pytest process: the folder is made here, and removed as it ends
        import atexit
        import shutil
        import tempfile

        folder = os.environ["SPECFLUX_TEST_BYTECODE"] = tempfile.mkdtemp(prefix="specflux-test-bytecode-")
        atexit.register(shutil.rmtree, folder, True)
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = folder


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Where the processes tests start keep their bytecode (above). And under pytest-xdist (`-n`),
    each worker's tmp_path is one folder deeper (.../popen-gw0/...): the run starts from a base
    shorter than pytest's own (/tmp/pytest-of-USER/pytest-N), so that a socket under a test's folder
    (an agent's egress.sock under TMPDIR) stays within AF_UNIX's 108 bytes as it does in a serial
    run. The base is removed when the run passes and kept when it does not."""
    _bytecode_for_what_tests_start(config)
    if hasattr(config, "workerinput") or config.option.basetemp or not getattr(config.option, "numprocesses", None):
        return
    import tempfile

    config.option.basetemp = tempfile.mkdtemp(prefix="sf-", dir="/tmp" if os.path.isdir("/tmp") else None)
    config.stash[_SHORT_BASE] = config.option.basetemp


def pytest_sessionfinish(session, exitstatus):
    base = session.config.stash.get(_SHORT_BASE, None)
    if base and exitstatus == 0:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
}


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    """Run git in `cwd` and return its stdout; fail the test on a non-zero exit."""
    full_env = {**os.environ, **GIT_ENV, **(env or {})}
    done = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


@pytest.fixture
def git_repo(tmp_path, monkeypatch) -> Path:
    """A real, empty git repository with a local identity and one initial commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test Author")
    git(repo, "config", "user.email", "author@example.com")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / "README.md").write_text("# project\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


@pytest.fixture
def corpus_files() -> list[Path]:
    """Every file of ../shared/corpus; skips the test where the corpus is not beside the checkout."""
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (CI has it beside the checkout)")
    return sorted(p for p in CORPUS.rglob("*") if p.is_file())


@pytest.fixture
def api(monkeypatch, request):
    """Start a scripted Messages API on 127.0.0.1 and point the SDK at it through the environment,
    like a user would; the key is the test module's API_KEY (checked never to be recorded)."""
    from specflux.agent.scripted import ScriptedServer

    servers: list[ScriptedServer] = []
    key = getattr(request.module, "API_KEY", "sk-ant-test-key")

    def start(*turns, route=None) -> ScriptedServer:
        """`start(reply, reply, ...)` in order, or `start({name: [replies]}, route=fn)` by name."""
        scripts = turns[0] if len(turns) == 1 and isinstance(turns[0], dict) else list(turns)
        server = ScriptedServer(scripts, route=route).__enter__()
        servers.append(server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the fast tier (tests/tier.py) before `-m fast` selects it; and under pytest-xdist
    (`-n`, `--dist loadgroup` from pyproject.toml), keep a module whose tests share a fixture made
    once per module (a wheel built and installed, a browser) on one worker, so it is made once."""
    from tier import is_fast
    from xdist_groups import group_module_fixture_users

    for item in items:
        if is_fast(item.nodeid):
            item.add_marker(pytest.mark.fast)
    group_module_fixture_users(items)


FAST_TIER_BUDGET_S = 90


def pytest_sessionstart(session):
    session.config.stash[_STARTED] = time.monotonic()


def pytest_terminal_summary(terminalreporter, config):
    """`pytest -m fast` over its budget says so (a number to act on, not a failure: the machine may be busy)."""
    took = time.monotonic() - config.stash.get(_STARTED, time.monotonic())
    if config.option.markexpr == "fast" and took > FAST_TIER_BUDGET_S:
        terminalreporter.write_line(f"the fast tier took {took:.0f} s, over its budget of {FAST_TIER_BUDGET_S} s: "
                                    "`pytest -m fast --durations=10` names its slowest tests (tests/tier.py chooses them)",
                                    yellow=True)
