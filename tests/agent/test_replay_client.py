"""A replay without the SDK (agent/replay_client.py): a recording of plain answers is replayed in
process, checked request by request exactly as through the SDK and `ReplayTransport`, and the
`anthropic` package is never imported; a recording the SDK must read (a recorded 429 the loop
retries on) still replays through it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_anthropic_backend import EVERY_TOOL, Hooks, files, repo, request  # noqa: F401 (repo: a fixture)

from specflux.agent.anthropic_backend import AnthropicBackend, live_backend, make_client, replay_backend
from specflux.agent.recording import ReplayTransport
from specflux.agent.replay_client import RecordedClient
from specflux.agent.scripted import Fail
from specflux.agent.tools import Toolbox
from specflux.base.errors import AgentError

API_KEY = "sk-ant-test-DO-NOT-RECORD-4242"


def record(api, repo: Path, tmp_path: Path, *turns) -> tuple[Path, Path]:
    """A live session recorded on `repo` (scripted API); (recording, a copy of the start)."""
    start = tmp_path / "pristine"
    shutil.copytree(repo, start)
    api(*(turns or EVERY_TOOL))
    recording = tmp_path / "rec" / "s1.jsonl"
    outcome = live_backend(recording, task_id="7", sleep=lambda s: None).run(request(), Toolbox(repo, Hooks()))
    assert outcome.stop == "end_session"
    return recording, start


def test_a_plain_recording_replays_without_the_sdk_and_the_same(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    backend = replay_backend(recording)
    assert isinstance(backend.client_factory(), RecordedClient)
    through_sdk = tmp_path / "through-sdk"
    shutil.copytree(start, through_sdk)
    hooks, sdk_hooks = Hooks(), Hooks()
    outcome = backend.run(request(), Toolbox(start, hooks))
    sdk = AnthropicBackend(client_factory=lambda: make_client(ReplayTransport(recording), api_key="replay",
                                                              base_url="https://replay.invalid"))
    expected = sdk.run(request(), Toolbox(through_sdk, sdk_hooks))
    assert outcome.stop == expected.stop == "end_session" and outcome.turns == expected.turns == 4
    assert files(start) == files(through_sdk) == files(repo)
    assert hooks.checked == sdk_hooks.checked == [1] and hooks.ended == sdk_hooks.ended
    assert outcome.usage == expected.usage and outcome.usage.cache_read_input_tokens == 1000


def test_a_recording_with_a_retried_429_replays_through_the_sdk(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path, *EVERY_TOOL[:1], Fail(429, retry_after=0), *EVERY_TOOL[1:])
    backend = replay_backend(recording)
    assert not isinstance(backend.client_factory(), RecordedClient)
    outcome = backend.run(request(), Toolbox(start, Hooks()))
    assert outcome.stop == "end_session" and outcome.turns == 4


def test_without_the_sdk_a_divergence_is_named_as_before(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    with pytest.raises(AgentError, match=r"diverged at turn 1 \(request 1\): messages\[0\]\.content\[0\]\.text"):
        replay_backend(recording).run(request("Task 7: something else."), Toolbox(start, Hooks()))
    (start / "pkg" / "greet.py").write_text("def greet():\n    return 'hi'\n")
    with pytest.raises(AgentError, match=r"diverged at turn 2 .*messages\[2\]\.content\[1\]\.content"):
        replay_backend(recording).run(request(), Toolbox(start, Hooks()))
    (start / "pkg" / "greet.py").write_text("def greet():\n    return 'helo'\n")
    recording.write_text("\n".join(recording.read_text().split("\n")[:5]) + "\n")
    with pytest.raises(AgentError, match=r"past the end of the recording \(2 requests\)"):
        replay_backend(recording).run(request(), Toolbox(start, Hooks()))


def test_a_replay_process_never_imports_the_sdk(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from test_anthropic_backend import Hooks, request\n"
        "from specflux.agent.anthropic_backend import replay_backend\n"
        "from specflux.agent.tools import Toolbox\n"
        "outcome = replay_backend(Path(sys.argv[1])).run(request(), Toolbox(Path(sys.argv[2]), Hooks()))\n"
        "print(json.dumps([outcome.stop, sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'httpx2', 'httpx'))]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(recording), str(start)], capture_output=True, text=True,
                          cwd=Path(__file__).parent, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == ["end_session", []]
