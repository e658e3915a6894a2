"""`backend.preflight()`: a set-up mistake (no API key, an agent CLI that cannot start, a missing
or garbled recording) is an AgentError saying what to do, found before a session changes anything,
without the network."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from specflux.agent.anthropic_backend import AnthropicBackend, live_backend, replay_backend
from specflux.agent.command_backend import CommandBackend, program_of
from specflux.agent.scripted import ScriptedServer
from specflux.base.errors import AgentError

# -- the command backend: can the agent CLI start? ---------------------------------------------


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A folder holding one executable agent CLI, `fake-agent`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    agent = folder / "fake-agent"
    agent.write_text("#!/bin/sh\necho hi\n")
    agent.chmod(0o755)
    return folder


def test_a_program_missing_from_path_is_refused(tmp_path: Path):
    with pytest.raises(AgentError) as e:
        CommandBackend("specflux-no-such-agent-cli -p --output-format json").preflight(tmp_path)
    assert str(e.value) == ("the agent command `specflux-no-such-agent-cli` was not found on PATH: "
                            "install it, or give its full path in --cmd")


def test_a_program_is_looked_up_on_the_backends_path(bin_dir: Path, tmp_path: Path):
    CommandBackend("fake-agent -p", env={"PATH": str(bin_dir)}).preflight(tmp_path)
    with pytest.raises(AgentError, match="`fake-agent` was not found on PATH"):
        CommandBackend("fake-agent -p", env={"PATH": str(tmp_path)}).preflight(tmp_path)


def test_variable_assignments_before_the_program_are_skipped(bin_dir: Path, tmp_path: Path):
    env = {"PATH": str(bin_dir)}
    CommandBackend("FOO=1 BAR='two words' fake-agent -p", env=env).preflight(tmp_path)
    with pytest.raises(AgentError, match="`nope` was not found"):
        CommandBackend("FOO=1 nope -p", env=env).preflight(tmp_path)


def test_a_real_interpreter_with_a_script_argument_passes(tmp_path: Path):
    CommandBackend(f"{shlex.quote(sys.executable)} /where/ever/agent.py").preflight(tmp_path)
    CommandBackend("sh -c 'exit 0'").preflight(tmp_path)


def test_a_path_is_checked_from_the_repository_root(tmp_path: Path):
    root = tmp_path / "repo"
    (root / "tools").mkdir(parents=True)
    script = root / "tools" / "agent.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(AgentError) as e:
        CommandBackend("./tools/agent.sh --go").preflight(root)
    assert str(e.value).startswith(
        "the agent command `./tools/agent.sh` is not executable: `chmod +x ./tools/agent.sh`")
    script.chmod(0o755)
    CommandBackend("./tools/agent.sh --go").preflight(root)
    CommandBackend(str(script)).preflight(tmp_path)  # an absolute path is itself
    # Without a root argument, the root is SPECFLUX_ROOT from the backend's environment.
    CommandBackend("./tools/agent.sh", env={"SPECFLUX_ROOT": str(root)}).preflight()
    with pytest.raises(AgentError) as e:
        CommandBackend("./tools/missing.sh").preflight(root)
    assert str(e.value) == (f"the agent command `./tools/missing.sh` does not exist (looked for "
                            f"{root / 'tools' / 'missing.sh'}): fix the path in --cmd")
    with pytest.raises(AgentError, match="^the agent command `./tools` is a folder, not a program"):
        CommandBackend("./tools").preflight(root)


@pytest.mark.parametrize("cmd", [
    "cd sub && ./agent.sh",
    "if true; then agent; fi",
    "$AGENT -p",
    "(cd sub; ./agent.sh)",
    "exec no-such-agent",
    "PATH=/opt/agents/bin no-such-agent",
    "A=$(pwd) no-such-agent",
    ">log no-such-agent",
    "'unbalanced",
    "",
    "FOO=1",
])
def test_a_command_line_too_shell_ish_to_judge_is_not_refused(cmd: str, tmp_path: Path):
    assert program_of(cmd) is None
    CommandBackend(cmd).preflight(tmp_path)


def test_the_program_of_a_command_line():
    assert program_of("claude -p --output-format json") == ("claude", {})
    assert program_of("CI=1 LANG=C codex exec --json") == ("codex", {"CI": "1", "LANG": "C"})
    assert program_of('"/opt/my agents/run" --x') == ("/opt/my agents/run", {})
    assert program_of("~/bin/agent")[0] == os.path.expanduser("~/bin/agent")


# -- the Anthropic backends: credentials, recordings --------------------------------------------


@pytest.fixture
def no_credentials(monkeypatch, tmp_path: Path) -> None:
    """No key, no token, no profile on disk (conftest already removes ANTHROPIC_API_KEY/_BASE_URL)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR", "ANTHROPIC_FEDERATION_RULE_ID",
                 "ANTHROPIC_IDENTITY_TOKEN", "ANTHROPIC_IDENTITY_TOKEN_FILE", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)


def test_no_api_key_is_refused_before_the_session(no_credentials, tmp_path: Path):
    recording = tmp_path / "rec.jsonl"
    for backend in (live_backend(recording, task_id="7"), AnthropicBackend()):
        with pytest.raises(AgentError, match="^no Anthropic API key: set ANTHROPIC_API_KEY"):
            backend.preflight()
    assert not recording.exists()  # nothing written: the session never started


def test_a_key_or_a_local_stand_in_passes(no_credentials, monkeypatch):
    live_backend(api_key="sk-ant-given").preflight()
    live_backend(base_url="http://127.0.0.1:9").preflight()  # a local stand-in needs no key
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")
    live_backend().preflight()
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN")
    with ScriptedServer([]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        AnthropicBackend().preflight()
        assert server.requests == []  # nothing was sent


def test_a_key_in_the_environment_is_checked_without_importing_the_sdk():
    code = ("import sys; from specflux.agent.anthropic_backend import live_backend; live_backend().preflight(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'httpx2')))")
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-env"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_custom_client_factory_has_nothing_to_check(no_credentials):
    AnthropicBackend(client_factory=lambda: None).preflight()
    calls = []
    AnthropicBackend(client_factory=lambda: None, check=lambda: calls.append("checked")).preflight()
    assert calls == ["checked"]


def test_a_missing_recording_is_refused_naming_its_path(tmp_path: Path):
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(AgentError) as e:
        replay_backend(missing).preflight()
    assert str(e.value).startswith(f"{missing}: cannot read the recording (No such file or directory): give "
                                   "--recording the path of a .jsonl file")
    with pytest.raises(AgentError, match="cannot read the recording"):
        replay_backend(tmp_path).preflight()  # a folder


@pytest.mark.parametrize("first_line", ["", "not json at all", '["a", "list"]', '{"no": "kind"}', "\udcff"])
def test_a_garbled_recording_is_refused_naming_its_first_line(tmp_path: Path, first_line: str):
    path = tmp_path / "garbled.jsonl"
    path.write_bytes(first_line.encode("utf-8", "surrogateescape") + b"\n{}\n")
    with pytest.raises(AgentError) as e:
        replay_backend(path).preflight()
    assert str(e.value).startswith(f"{path}:1: not a recording (its first line is not a JSON record with a `kind`)")


def test_a_recording_that_starts_well_passes(tmp_path: Path):
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps({"kind": "meta", "format": 1, "model": "m", "task_id": "7"}) + "\n")
    replay_backend(path).preflight()
