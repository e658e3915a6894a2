"""What a misbehaving agent CLI can reach besides files, end to end (`specflux run --agent command`
in a real repository), in each sandbox mode this machine has: bubblewrap, Landlock and none
(`--no-sandbox`).

- its environment is an allowlist: the user's ANTHROPIC_API_KEY, SECRET_TOKEN, SSH_AUTH_SOCK and
  git's credential helper stay out; PATH, the locale and SPECFLUX_* get in, and what
  `[agents.NAME] env` hands over;
- what it leaves running ends with the session: a `setsid` daemon that would go on writing into
  the tree, and one holding a lock, are gone when `specflux run` returns.
"""

from __future__ import annotations

import fcntl
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import git
from helpers import alive, run

from specflux.agent.sandbox import choose
from specflux.base.errors import AgentError

MODES = ["bwrap", "landlock", "none"]


def available(mode: str) -> bool:
    if mode == "none":
        return True
    try:
        return choose(mode).confined
    except AgentError:
        return False


def each_mode():
    return [pytest.param(m, marks=pytest.mark.skipif(not available(m), reason=f"{m} is not available here"))
            for m in MODES]


USER_SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-user-secret", "SECRET_TOKEN": "tok-user-secret",
                "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock", "GIT_ASKPASS": "/usr/bin/steal-password",
                "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "credential.helper", "GIT_CONFIG_VALUE_0": "store",
                "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color", "SPECFLUX_EXTRA": "for the agent"}

ENV_AGENT = '''\
import json, os
json.dump(dict(os.environ), open("env.json", "w"))
'''


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Do work", "--ac", "work is done")[0] == 0
    (git_repo / ".gitignore").write_text("env.json\n*.pid\nleftover.txt\nheld.lock\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def specflux_run(repo: Path, mode: str, cmd: str, *extra: str, env: dict | None = None,
                 agent: str = "command") -> subprocess.CompletedProcess:
    full = {**os.environ, **USER_SECRETS, **(env or {}),
            "SPECFLUX_CLI_SANDBOX": "auto" if mode == "none" else mode,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    args = ["run", "1", "--agent", agent, *(["--cmd", cmd] if agent == "command" else [])]
    if mode == "none":
        args.append("--no-sandbox")
    return subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args, *extra],
                          capture_output=True, text=True, env=full, timeout=300)


@pytest.mark.parametrize("mode", each_mode())
def test_an_agent_cli_sees_only_the_allowed_environment(project: Path, tmp_path: Path, mode: str):
    (tmp_path / "agent.py").write_text(ENV_AGENT)
    done = specflux_run(project, mode, f"{sys.executable} {tmp_path / 'agent.py'}")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads((project / "env.json").read_text())
    for name in ("ANTHROPIC_API_KEY", "SECRET_TOKEN", "SSH_AUTH_SOCK", "GIT_ASKPASS", "GIT_CONFIG_COUNT",
                 "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"):
        assert name not in seen, f"{name} reached the agent ({mode})"
    assert "sk-ant-user-secret" not in json.dumps(seen) and "tok-user-secret" not in json.dumps(seen)
    assert seen["LANG"] == "C.UTF-8" and seen["LC_ALL"] == "C.UTF-8" and seen["TERM"] == "xterm-256color"
    assert seen["PATH"].startswith(str(Path(sys.executable).parent))
    assert seen["SPECFLUX_EXTRA"] == "for the agent" and seen["SPECFLUX_TASK_ID"] == "1"
    if mode == "none":  # no sandbox: the user's own HOME
        assert seen["HOME"] == os.environ["HOME"]
    else:
        assert seen["HOME"] != os.environ["HOME"]


@pytest.mark.parametrize("mode", each_mode())
def test_agents_env_in_config_hands_a_variable_over(project: Path, tmp_path: Path, mode: str):
    """`[agents.NAME] env`: a value of its own, and `$NAME`, the user's variable handed over."""
    (tmp_path / "agent.py").write_text(ENV_AGENT)
    config = project / ".specflux" / "config.toml"
    config.write_text(config.read_text() + f'\n[agents.mine]\ncommand = "{sys.executable} {tmp_path / "agent.py"}"\n'
                      'env = { MY_TOKEN = "$SECRET_TOKEN", MODE = "quiet", GONE = "${NOT_SET_ANYWHERE}" }\n')
    done = specflux_run(project, mode, "", agent="mine")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads((project / "env.json").read_text())
    assert seen["MY_TOKEN"] == "tok-user-secret" and seen["MODE"] == "quiet" and "GONE" not in seen
    assert "SECRET_TOKEN" not in seen and "ANTHROPIC_API_KEY" not in seen


LEFTOVER_AGENT = '''\
import os, subprocess, sys
mark = sys.argv[1]  # in each daemon's command line, for the test to look for
# a daemon that goes on writing into the tree, out of the session's process group
subprocess.Popen(["setsid", "sh", "-c", "echo $$ > writer.pid; sleep 1; "
                  "while :; do echo x >> leftover.txt; sleep 0.2; done", mark])
# a daemon holding a lock through a read-only descriptor
subprocess.Popen(["setsid", "sh", "-c", "echo $$ > locker.pid; exec flock -s held.lock sh -c 'sleep 600' $0", mark])
import time
while not (os.path.exists("writer.pid") and os.path.exists("locker.pid") and os.path.getsize("locker.pid")):
    time.sleep(0.01)
while True:  # the lock taken
    try:
        with open("held.lock") as f:
            import fcntl
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        break
    time.sleep(0.01)
print("left two daemons behind")
'''


@pytest.mark.parametrize("mode", each_mode())
def test_what_an_agent_leaves_running_ends_with_its_session(project: Path, tmp_path: Path, mode: str):
    (project / "held.lock").write_text("")
    (tmp_path / "agent.py").write_text(LEFTOVER_AGENT)
    mark = f"specflux-leftover-{uuid.uuid4().hex}"
    done = specflux_run(project, mode, f"{sys.executable} {tmp_path / 'agent.py'} {mark}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left two daemons behind" in done.stdout
    for name in ("writer.pid", "locker.pid"):
        pid = int((project / name).read_text().strip() or 0)
        if mode == "bwrap":  # a PID of the namespace: find it by what it runs instead
            pid = 0
        assert not pid or not alive(pid), f"{name}: process {pid} outlived the session ({mode})"
    leftovers = subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True)
    assert leftovers.stdout.strip() == "", f"processes outlived the session: {leftovers.stdout}"
    with open(project / "held.lock") as f:  # nobody holds the lock
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


NETWORK_AGENT = r'''\
import json, os, subprocess, sys, urllib.request
remote, base = sys.argv[1], os.environ["MODEL_BASE_URL"]
report = {}
try:
    report["model"] = urllib.request.urlopen(base + "/hello", timeout=20).read().decode()
except Exception as e:
    report["model"] = repr(e)
report["ls_remote"] = subprocess.run(["git", "ls-remote", remote], capture_output=True, text=True,
                                     timeout=60).returncode
subprocess.run(["git", "checkout", "-q", "-b", "forged"])
report["push"] = subprocess.run(["git", "push", remote, "HEAD:refs/heads/forged"], capture_output=True,
                                text=True, timeout=60).returncode
subprocess.run(["git", "checkout", "-q", "-"])
proxy = os.environ.get("HTTP_PROXY")
if proxy:  # the egress proxy refuses the remote's host too
    import socket
    port = remote.split(":")[2].split("/")[0]
    host, proxy_port = proxy.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(proxy_port)), timeout=20) as s:
        s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        report["via_proxy"] = int(s.recv(4096).split()[1])
json.dump(report, open("net.json", "w"))
'''


class _Model(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the standard library's name
        body = b"model says hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def model_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class Daemon:
    """`git daemon --enable=receive-pack` serving `base` on a free port of 127.0.0.1."""

    def __init__(self, base: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = base

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> "Daemon":
        self.process = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                                         f"--base-path={self.base}", "--listen=127.0.0.1", f"--port={self.port}",
                                         str(self.base)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("git daemon did not start")

    def __exit__(self, *exc) -> None:
        os.killpg(self.process.pid, 9)
        self.process.wait()


@pytest.mark.parametrize("mode", each_mode())
def test_a_confined_agent_reaches_its_model_and_not_the_teams_remote(project: Path, tmp_path: Path, mode: str,
                                                                     model_server: str):
    """The agent reaches the model server its base URL names; `git ls-remote` and `git push` to a
    `git daemon` on loopback fail, and the egress proxy refuses it too. Without a sandbox both
    work, and the run says the network is not confined."""
    bare = tmp_path / "remotes" / "team.git"
    bare.parent.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(project), str(bare))
    (project / ".gitignore").write_text((project / ".gitignore").read_text() + "net.json\n")
    git(project, "commit", "-qam", "ignore net.json")
    (tmp_path / "agent.py").write_text(NETWORK_AGENT)
    config = project / ".specflux" / "config.toml"
    with Daemon(tmp_path / "remotes") as daemon:
        config.write_text(config.read_text() + f'\n[agents.mine]\ncommand = "{sys.executable} {tmp_path / "agent.py"} '
                          f'{daemon.url("team.git")}"\nenv = {{ MODEL_BASE_URL = "{model_server}/v1" }}\n')
        done = specflux_run(project, mode, "", agent="mine")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((project / "net.json").read_text())
    assert report["model"] == "model says hi", report
    pushed = subprocess.run(["git", "rev-parse", "--verify", "-q", "refs/heads/forged"], cwd=bare,
                            capture_output=True).returncode == 0
    if mode == "none":
        assert report["ls_remote"] == 0 and report["push"] == 0 and pushed
        assert "network: NOT confined" in done.stderr
        return
    assert report["ls_remote"] != 0 and report["push"] != 0 and not pushed, report
    assert report["via_proxy"] == 403, report
    assert f"the agent tried to reach 127.0.0.1:{daemon.port}: refused" in done.stderr
    assert f"network: only 127.0.0.1:{model_server.rsplit(':', 1)[1]}" in done.stderr


# --------------------------------------------------------------------- an API agent's run_command


class _Hooks:
    def check_criterion(self, index: int) -> str:
        raise AssertionError("not called")

    def end_session(self, handoff) -> str:
        raise AssertionError("not called")


def toolbox(repo: Path, mode: str):
    from specflux.agent.tools import Toolbox

    return Toolbox(repo, _Hooks(), command_timeout_s=60, sandbox=choose(mode) if mode != "none" else None)


@pytest.mark.parametrize("mode", each_mode())
def test_run_command_gets_the_allowlist_and_no_network_and_leaves_nothing_running(project: Path, tmp_path: Path,
                                                                               mode: str, monkeypatch):
    for name, value in USER_SECRETS.items():
        monkeypatch.setenv(name, value)
    box = toolbox(project, mode)
    try:
        env = box.call("run_command", {"command": "env"}).content
        assert "tok-user-secret" not in env and "sk-ant-user-secret" not in env and "SSH_AUTH_SOCK" not in env
        assert "GIT_ASKPASS" not in env and "SPECFLUX_EXTRA=for the agent" in env
        bare = tmp_path / "remotes" / "team.git"
        bare.parent.mkdir()
        git(tmp_path, "clone", "-q", "--bare", str(project), str(bare))
        with Daemon(tmp_path / "remotes") as daemon:
            listed = box.call("run_command", {"command": f"git ls-remote {daemon.url('team.git')}"}).content
        assert listed.startswith("exit code: 0" if mode == "none" else "exit code: 128"), listed
        mark = f"specflux-leftover-{uuid.uuid4().hex}"
        done = box.call("run_command", {"command": f"setsid sh -c 'sleep 600' {mark} & echo started"}).content
        assert "started" in done
        assert subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout == ""
    finally:
        box.close()


@pytest.mark.skipif(not available("bwrap"), reason="bwrap is not available here")
def test_an_agent_cli_with_no_hosts_gets_no_network_and_no_relay_under_bubblewrap(project: Path, tmp_path: Path):
    """`--agent command` allows no host: under bubblewrap it runs in a network namespace of its own
    with nothing started to relay (no proxy, no bridge), so a connection to a listener on this
    machine's loopback fails, and the run says so in its reach line."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    (tmp_path / "agent.py").write_text(
        "import json, os, socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close(); reached = True\n"
        "except OSError:\n"
        "    reached = False\n"
        "json.dump({'reached': reached, 'proxy': os.environ.get('HTTP_PROXY')}, open('env.json', 'w'))\n")
    try:
        done = specflux_run(project, "bwrap", f"{sys.executable} {tmp_path / 'agent.py'}")
    finally:
        listener.close()
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((project / "env.json").read_text())
    assert report == {"reached": False, "proxy": None}, report
    assert "network: no host (a network namespace of its own);" in done.stderr


def test_a_run_says_its_agents_reach_once(project: Path, capsys):
    """A run's sessions share one sandbox: its reach line is said at the run's first session, not
    at each (a 50-task run used to print it 150 times); `specflux run` sessions say it each time."""
    from specflux.agent.command_backend import CommandBackend
    from specflux.agent.session import run_session
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    manager = TaskStateManager(Workspace.find(explicit=project), git=False)
    run_id = f"run-{uuid.uuid4().hex}"
    for run in (run_id, run_id, run_id, None, None):
        env = {"SPECFLUX_ROOT": str(project), **({"SPECFLUX_RUN": run} if run else {})}
        assert run_session(manager, "1", CommandBackend("true", timeout_s=60, env=env, sandbox="off"), commit=False).ok
    assert capsys.readouterr().err.count("the agent runs without a sandbox") == 3
