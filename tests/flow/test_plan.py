"""`specflux plan PRD`: the planner through the real SDK against a scripted local API, with a
hand-in refused back to the agent (an unknown dependency) and corrected."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run

from specflux.agent.scripted import Reply, call

API_KEY = "sk-ant-test-PLAN-31"

PRD = "# Login\n\nUsers log in with email and password. Sessions expire after 15 minutes.\n"


def task(key, title, deps=(), priority=2, complexity="medium", criteria=("it works",)):
    return {"key": key, "title": title, "requirements": f"{title}: as the PRD says.",
            "acceptance_criteria": list(criteria), "priority": priority, "complexity": complexity,
            "dependencies": list(deps)}


BAD = [task("schema", "Users table"), task("login", "Login endpoint", deps=["schema", "tokens"])]
GOOD = [task("schema", "Users table", priority=1, complexity="simple", criteria=["users table has email, hash"]),
        task("tokens", "Session tokens", priority=2),
        task("login", "Login endpoint", deps=["schema", "tokens"], priority=2, complexity="complex",
             criteria=["POST /login returns a token", "a wrong password is a 401"])]


def workspace(tmp_path: Path, capsys) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    assert run(capsys, root, "init", str(root))[0] == 0
    (root / "docs").mkdir()
    (root / "docs" / "prd.md").write_text(PRD)
    return root


def scripted():
    return [Reply(calls=[call("read_file", path="docs/prd.md")]),
            Reply(calls=[call("submit_tasks", tasks=BAD)]),
            Reply(calls=[call("submit_tasks", tasks=GOOD)])]


def test_plan_creates_linked_tasks_after_a_refused_hand_in(tmp_path, api, capsys):
    root = workspace(tmp_path, capsys)
    server = api(*scripted())
    code, out, err = run(capsys, root, "plan", str(root / "docs" / "prd.md"))
    assert code == 0, out + err
    refused = server.requests[2]["messages"][-1]["content"][0]
    assert refused["is_error"] and "tokens" in str(refused["content"]), "the refusal names the unknown key"
    assert [t["name"] for t in server.requests[0]["tools"]] == ["read_file", "list_files", "search", "submit_tasks"]
    context = first_message(server)
    assert "The requirements document `docs/prd.md`, in full:\n\n<requirements>\n# Login\n\nUsers log in" in context
    assert "Sessions expire after 15 minutes.\n</requirements>" in context, "the PRD is embedded, not only linked"
    assert "3 task(s) (priority 1: 1, priority 2: 2); estimated size: days" in out
    listed = json.loads(run(capsys, root, "list", "--json")[1])
    assert sorted((r["id"], r["title"], r["dependencies"]) for r in listed) == [
        ("login", "Login endpoint", ["schema", "tokens"]), ("schema", "Users table", []),
        ("tokens", "Session tokens", [])], "the planner's keys are the task ids where they can be"
    shown = json.loads(run(capsys, root, "show", "login", "--json")[1])
    assert shown["metadata"]["priority"] == 2 and shown["metadata"]["complexity"] == "complex"
    assert [c["text"] for c in shown["criteria"]] == ["POST /login returns a token", "a wrong password is a 401"]
    assert "[docs/prd.md](../../docs/prd.md)" in shown["requirements"], "the PRD is linked"
    assert "Sessions expire" not in (root / ".specflux" / "task-states" / "task-login-state.md").read_text(), "not copied"
    assert run(capsys, root, "lint")[0] == 0


def first_message(server) -> str:
    content = server.requests[0]["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(block.get("text", "") for block in content)


def test_a_prd_past_the_context_cap_is_embedded_up_to_it_and_the_rest_linked_saying_so(tmp_path, api, capsys,
                                                                                        monkeypatch):
    import specflux.flow.plan as plan_module

    root = workspace(tmp_path, capsys)
    sections = [f"## Requirement {n}\n\n" + f"Requirement {n} is described here in a long sentence. " * 6 + "\n"
                for n in range(1, 41)]
    (root / "docs" / "prd.md").write_text("# Big product\n\n" + "\n".join(sections))
    monkeypatch.setattr(plan_module, "PRD_CAP_KB", 8)
    server = api(Reply(calls=[call("submit_tasks", tasks=GOOD)]))
    code, out, err = run(capsys, root, "plan", str(root / "docs" / "prd.md"), "--dry-run")
    assert code == 0, out + err
    context = first_message(server)
    embedded = context.split("<requirements>\n", 1)[1].split("\n</requirements>", 1)[0]
    assert 7 * 1024 < len(embedded.encode()) <= 8 * 1024, "up to the cap, in whole lines"
    assert embedded.startswith("# Big product") and "## Requirement 40" not in embedded
    total = len((root / "docs" / "prd.md").read_text().splitlines())
    kept = embedded.count("\n") + 1
    assert (f"The requirements document `docs/prd.md` is longer than the context cap (8 KB): its lines 1-{kept} "
            f"of {total} are below; lines {kept + 1}-{total} are not.") in context, "it says so"
    assert "- line " in context and ": ## Requirement 40" in context, "the headings of the rest are listed"


def test_plan_dry_run_writes_nothing(tmp_path, api, capsys):
    root = workspace(tmp_path, capsys)
    api(*scripted())
    before = sorted(p.name for p in (root / ".specflux" / "task-states").iterdir())
    code, out, err = run(capsys, root, "plan", str(root / "docs" / "prd.md"), "--dry-run")
    assert code == 0, err
    assert "Login endpoint" in out and "nothing was written" in out
    assert sorted(p.name for p in (root / ".specflux" / "task-states").iterdir()) == before


def test_a_planner_that_hands_in_nothing_is_an_error(tmp_path, api, capsys):
    root = workspace(tmp_path, capsys)
    api(Reply(text="I have no idea.", stop_reason="end_turn"))
    code, out, err = run(capsys, root, "plan", str(root / "docs" / "prd.md"))
    assert code == 1 and "handed in no tasks" in err


def test_numeric_or_taken_keys_get_the_next_numbers(tmp_path, api, capsys):
    root = workspace(tmp_path, capsys)
    assert run(capsys, root, "new", "Existing", "--id", "schema")[0] == 0
    api(Reply(calls=[call("submit_tasks", tasks=[task("1", "First"), task("schema", "Users table", deps=["1"])])]))
    code, out, err = run(capsys, root, "plan", str(root / "docs" / "prd.md"))
    assert code == 0, err
    listed = {r["id"]: r for r in json.loads(run(capsys, root, "list", "--json")[1])}
    assert listed["1"]["title"] == "First" and listed["2"]["title"] == "Users table"
    assert listed["2"]["dependencies"] == ["1"] and listed["schema"]["title"] == "Existing"


def test_flow_start_with_a_prd_plans_then_runs_the_new_tasks(tmp_path, api, capsys):
    root = workspace(tmp_path, capsys)
    plan_turns = [Reply(calls=[call("submit_tasks", tasks=[task("notes", "Write NOTES.md", criteria=["NOTES.md exists"])])])]
    coder = [Reply(calls=[call("write_file", path="NOTES.md", content="notes\n"), call("check_criterion", index=1)]),
             Reply(calls=[call("end_session", did=["wrote NOTES.md"], issues="", next="",
                               chain_output={"summary": "NOTES.md exists"})])]
    review = [Reply(calls=[call("submit_review", approved=True, issues=[],
                                criteria_results=[{"criterion": "NOTES.md exists", "met": True}])])]
    api(*plan_turns, *coder, *review)
    code, out, err = run(capsys, root, "flow", "start", "--prd", str(root / "docs" / "prd.md"))
    assert code == 0, out + err
    assert "planned 1 task(s)" in err
    state = json.loads(run(capsys, root, "flow", "status", "--json")[1])
    assert state["status"] == "completed" and [t["id"] for t in state["tasks"]] == ["notes"]
    assert (root / "NOTES.md").read_text() == "notes\n"
