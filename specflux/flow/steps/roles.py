"""The roles of a run, as thin adapters over what exists: the coder and the reviewer are agent
sessions (`run_session`), validate runs the project's tests. Each returns a StepResult whose
`output` goes into the run state under the seed's names (coderOutput, reviewerOutput, validation).

Evidence lives in code: `coderOutput.selfValidation.passed` is what the tests say when
`[validate]` is configured, never the agent's claim; the reviewer's verdict is checked against
its schema before it counts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.errors import SpecfluxError
from specflux.base.records import Factory, record
from specflux.format.render import now_stamp
from specflux.flow.decisions import AgentErrorInfo
from specflux.flow.steps.attempt import agent_failed, claim, retry_context
from specflux.flow.steps.attempts import Attempts
from specflux.flow.steps.crashed import commit_crashed, finished_commit
from specflux.flow.steps.evidence import expects_change, task_unchanged, uncommitted, unjudged, work_tree_fingerprint
from specflux.flow.steps.handins import handin_summary, no_verdict, open_channel, tampering_notices

if TYPE_CHECKING:
    import threading

    from specflux.store.manager import TaskStateManager
    from specflux.flow.record.run import Run

DIFF_LIMIT = 20_000  # characters of the change shown to the reviewer


class Interrupted(Exception):
    """The step was interrupted (`flow stop`, Ctrl-C): the session recorded so."""


@record
class StepResult:
    status: str  # "OK" or "ERROR"
    output: dict[str, Any] | None
    validation: dict[str, Any] | None = None
    usage: dict[str, Any] = Factory(dict)
    duration_ms: int = 0
    error: AgentErrorInfo | None = None
    chain_output: dict[str, str] | None = None
    commit: str = ""
    stamp: str | None = None  # the time written in the step's session entry
    tree: str | None = None  # the coder's: the work tree it left, .specflux/ aside (stall detection)
    refused: str | None = None  # why the engine refused what the step did (its branch rewritten, ...)
    accepted: str | None = None  # the task completed in the reviewer's commit (flow/early_acceptance.py)
    wired: list[str] | None = None  # ... and the tasks its chain output went into
    moment: tuple[int, int] | None = None  # the decision's (now, seed), where made before the commit

    def to_event(self) -> dict[str, Any]:
        event = {"status": self.status, "output": self.output, "usage": self.usage, "durationMs": self.duration_ms}
        if self.validation is not None:
            event["validation"] = self.validation
        if self.error is not None:
            event["error"] = {"type": self.error.type, "message": self.error.message,
                              "retryAfterS": self.error.retry_after_s}
        if self.chain_output is not None:
            event["chainOutput"] = self.chain_output
        if self.commit:
            event["commit"] = self.commit
        if self.stamp:
            event["stamp"] = self.stamp
        if self.tree:
            event["tree"] = self.tree
        if self.refused:
            event["refused"] = self.refused
        if self.accepted:
            event["accepted"], event["wired"] = self.accepted, list(self.wired or [])
        return event


@record
class Agents:
    """How a run's agent roles are run: `kind` anthropic, command (`cmd`) or replay (run `replay_from`'s recordings)."""

    kind: str = "anthropic"  # or an agent CLI: a preset (agent/presets.py), an [agents.NAME], command
    cmd: str | None = None
    replay_from: Path | None = None
    model: str | None = None
    timeout_s: float | None = None
    sandbox: str | None = None  # an agent CLI's sandbox: "off" (--no-sandbox), else [agent] sandbox
    allow_unmetered: bool = False  # a budget in money its output cannot feed (agent/metering.py): run anyway

    @property
    def is_cli(self) -> bool:
        """Whether the roles run an agent CLI (which edits its task file and hands in by `specflux`)."""
        return self.kind not in ("anthropic", "replay")


class Roles:
    def __init__(self, manager: "TaskStateManager", run: "Run", agents: Agents,
                 say: Callable[[str], None] = lambda line: None, cancel: "threading.Event | None" = None):
        """`cancel`: set by a parallel run's engine to stop the agents of its lanes (`flow stop`)."""
        self.manager, self.run, self.agents, self.say, self.cancel = manager, run, agents, say, cancel
        self._resumed = False
        self._key = ""
        self._stamp: str | None = None
        self._note = ""
        self._lanes = 1
        self._budget_left: int | None = None
        self._budget_left_usd: float | None = None
        self._share: Any = None  # (a lane's step: lanes/shares.py)
        self._attempts = Attempts()  # the coder commits this process made (flow/steps/attempts.py)
        self.accept_in_commit: Callable[..., Any] | None = None  # the engine's (flow/early_acceptance.py)
        self._accepted: dict[str, Any] = {}  # what the reviewer's commit accepted
        # HEAD and the work tree's status right after this roles' last session's commit: the next
        # session's baseline, where it comes next and nothing ran between that could write (a
        # coder's tests could: then None); Git.capture takes it only while HEAD is still that commit
        self._known: tuple[str, dict] | None = None
        self._edited: list[Path] = []  # the files the last coder session changed: tested without stale bytecode

    def in_lane(self, manager: "TaskStateManager", note: str = "", lanes: int = 1, share: Any = None) -> "Roles":
        """These roles working in a lane's worktree (`manager` rooted there), for one step: a
        parallel run gives each step its own, so steps in different threads share nothing.
        `note` goes first in the coder's context (why this attempt starts where it does);
        `lanes`: how many share what is left of the run's budgets; or `share`: lanes/shares.py."""
        roles = Roles(manager, self.run, self.agents, self.say, self.cancel)
        roles._note = note
        roles._lanes = max(1, lanes)
        roles._share = share
        return roles

    def perform(self, step: dict[str, Any], state: dict[str, Any], resumed: bool = False, key: str = "",
                stamp: str | None = None) -> StepResult:
        """Do `step`. `resumed`: the engine died during this step before; a session it had
        finished is not run again, and the work of one it had not is committed as that attempt.
        `key` names this try of the step (its recording); `stamp` is the time written in its
        session entry (a replay passes the recorded one, so that every later context matches)."""
        self._resumed = resumed
        known, self._known = self._known, None  # (only for the step right after)
        self._key = key or f"{step['stepId']}#1"
        self._stamp = stamp
        from specflux.flow.workflow.limits import budget_left

        left, money = budget_left(state)
        self._budget_left = None if left is None else left // self._lanes  # lanes at once: a share each
        self._budget_left_usd = None if money is None else max(money, 0.0) / self._lanes
        if self._share is not None:  # what the run gave this lane's step of its budgets
            self._budget_left, self._budget_left_usd = self._share.tokens, self._share.usd
        kind = step["kind"]
        if kind == "coder":
            return self.coder(step, state, known)
        if kind == "reviewer":
            return self.reviewer(step, state, known)
        if kind == "validate":
            return self.validate(step)
        raise SpecfluxError(f"the run asked for work of kind {kind!r}, which no role does "
                            "(roles: coder, validate, reviewer, approval)")

    # ----------------------------------------------------------------- coder

    def coder(self, step: dict[str, Any], state: dict[str, Any], known: tuple[str, dict] | None = None) -> StepResult:
        task_id = step["taskId"]
        started = time.monotonic()
        extra = "\n\n".join(part for part in (self._note, retry_context(state, task_id)) if part)
        if self.agents.is_cli:
            extra = (f"This session is one step of workflow run {self.run.id}: the run decides when the task is "
                     "complete. Do not run `specflux complete`; when every criterion is met, write `### Summary` "
                     "and `### For Downstream Tasks` under `## 4. Chain Output` yourself.\n\n" + extra).strip()
        done = self._session(step, "coder", extra_context=extra, known_status=known)
        usage = done["usage"]
        failure = _api_failure(done)
        timed_out = failure is not None and failure.type == "TIMEOUT"
        if failure is not None and not timed_out:  # the API, not the work, failed: on_agent_error decides
            return StepResult("ERROR", None, usage=usage, duration_ms=_ms(started), error=failure)
        self._attempts.note(task_id, done["commit"] or "")
        git = self.manager.git
        self._edited = [git.root / p for p in done.get("changed") or ()] if git is not None else []
        dirty = done.get("uncommitted")  # as the session's commit left it, else one `git status` for both
        if dirty is None and git is not None:
            dirty = uncommitted(self.manager)
        tree = work_tree_fingerprint(self.manager, dirty)
        exited = None if timed_out else agent_failed(done)
        attempted = not timed_out and not exited
        # where the attempt's commit already shows a change, the tests run while its diff is taken
        early = attempted and self._attempts.surely_changed(self.manager.git, state, task_id, done)
        tested = self._run_tests() if early else None
        unchanged = attempted and not self._changed_in_run(task_id, state) \
            and task_unchanged(self.manager, self.run.id, task_id, dirty) and expects_change(self.manager, task_id)
        validation = None if not attempted or unchanged else (tested if early else self._run_tests())
        if tested is not None or validation is not None:
            self._known = None  # the tests may have written files (reports, caches): the reviewer asks git
        if timed_out:  # an attempt that failed, retried under the workflow's limits like any other
            checked = {"passed": False, "issues": [f"the session timed out: {failure.message}"]}
        elif exited:  # its CLI failed: a failed attempt, whatever its task file or the tests say
            checked = {"passed": False, "agentFailed": True, "issues": [exited]}
        elif unchanged:  # nothing to test and nothing to review: not accepted, whatever the agent says
            checked = {"passed": False, "noChange": True,
                       "issues": ["no change: the task's attempts in this run changed nothing in the repository "
                                  "(.specflux/ aside); the task needs a change (its metadata would say "
                                  "\"expects_change\": false otherwise)"]}
        elif validation is not None:
            checked = {"passed": validation.passed, "issues": validation.issues()}
        else:
            claimed, why = claim(done, self.manager, task_id)
            checked = {"passed": claimed, "issues": [] if claimed else [why], "claimedByAgent": True}
        status = "complete" if checked["passed"] else \
            ("blocked" if done["stop"] == "error" and not exited else "needs_revision")
        output = {"taskId": task_id, "code": done["code"], "status": status, "selfValidation": checked}
        if done.get("notices") or tampering_notices(done):
            output["notices"] = [*done.get("notices", []), *tampering_notices(done)]
        chain = (done["handoff"] or {}).get("chainOutput")
        if chain is None and done["handoff"]:  # no chain output handed over: the coder's own account
            output["did"] = done["handoff"]["did"]
        return StepResult("OK", output, validation=validation.to_state() if validation else None, usage=usage,
                          duration_ms=_ms(started), chain_output=chain, commit=done["commit"], tree=tree)

    # ----------------------------------------------------------------- one session, once

    def _session(self, step: dict[str, Any], role: str, **options: Any) -> dict[str, Any]:
        """Run the step's agent session, or, on a resumed step, take what the session that the
        crash interrupted had already finished. Returns a plain summary, saved before it is used."""
        import json

        named = self._key.replace('#', '-')  # this try's files
        saved = self._steps / f"{named}.session.json"
        if saved.is_file():  # (the tree may have changed since: what it left uncommitted is read again)
            return {**json.loads(saved.read_text(encoding="utf-8")), "uncommitted": None}
        self._accepted = {}
        early = self._steps / f"{named}.early.json"  # written just before its commit
        if self._resumed:
            finished = finished_commit(self.manager, self.run.id, step, early)
            if finished is not None:
                return finished
            for line in commit_crashed(self.manager, step, self._steps, self._trailers(role, step)):
                self.say(line)
        from specflux.agent.session import run_session

        task_id = step["taskId"]
        handin = open_channel(step["stepId"]) if self.agents.is_cli and role != "coder" else None
        try:
            backend, edits = self._backend(step, role, handin)
            self._steps.mkdir(parents=True, exist_ok=True)
            clock = (lambda: self._stamp) if self._stamp else now_stamp
            report = run_session(self.manager, task_id, backend, commit=self._commits(), edits_task_file=edits,
                                 clock=clock, role=role, trailers=self._trailers(role, step), complete_on_handoff=False,
                                 say=self.say, model=self.agents.model, handin=handin,
                                 token_budget=self._session_budget(), budget_usd=self._budget_left_usd,
                                 baseline_path=self._steps / f"{step['stepId']}.baseline.json", guard=True,
                                 before_commit=self._accepting(step, early) if role == "reviewer" else None, **options)
            received = handin.receive() if handin is not None else None
            self._known = report.after  # the next session's baseline, if nothing writes before it (coder: tests)
        finally:
            if handin is not None:
                handin.close()
        if report.stop == "interrupted":
            raise Interrupted(report.error or "interrupted")
        handoff = report.handoff
        for notice in report.notices:  # what the session put back, left out, could not do: said
            self.say(f"task {task_id}: {notice}")
        summary = {
            "notices": list(report.notices),
            "stop": report.stop, "ok": report.ok, "session": report.session, "commit": report.commit,
            "error": report.error, "usage": _usage(report), "code": _code_summary(report), "review": report.review,
            "uncommitted": report.uncommitted, "changed": list(report.changed),
            **handin_summary(received, self.run, step), **self._accepted,
            "handoff": None if handoff is None else {
                "did": list(handoff.did),
                "chainOutput": None if handoff.chain_output is None else {
                    "summary": handoff.chain_output.summary, "downstream": handoff.chain_output.downstream}},
        }
        from specflux.base.files import atomic_write

        atomic_write(saved, json.dumps(summary, ensure_ascii=False), sync=False)  # (a power cut redoes the step)
        return summary

    def _accepting(self, step: dict[str, Any], early: Path) -> Callable[[Any], list[Path] | None]:
        """What the reviewer's session does before its commit: its verdict is written down
        (`early`: a kill between the commit and the step's summary resumes with it, instead of
        taking the committed review for one without a verdict: steps/crashed.py); and where the
        engine decides on it there (`accept_in_commit`: one lane, specflux's own specs) and the
        decision accepts the task, the task's completion goes into that commit (the files it
        wrote are returned) and the note says so, with the decision's moment."""
        accept = self.accept_in_commit

        def before_commit(report) -> list[Path] | None:
            task_id = step["taskId"]
            done = {"session": report.session, "stop": report.stop, "error": report.error}
            if report.review is None or _api_failure(done) is not None or unjudged(report.review, self.manager, task_id):
                return None
            import json

            from specflux.base.files import atomic_write, watching_writes

            completed: list[Path] | None = None
            if accept is not None:
                result = StepResult("OK", {"taskId": task_id, **report.review}, usage=_usage(report))
                with watching_writes() as written:
                    accepted = accept(step, result)
                if accepted is not None:
                    self._accepted = {"accepted": task_id, "wired": accepted.wired, "moment": list(accepted.moment)}
                    completed = written
            # the verdict, accepted or not: a kill between the commit and the step's summary resumes with it
            atomic_write(early, json.dumps({"session": report.session, "review": report.review, **self._accepted}),
                         sync=False)  # (synced with the step's writes: synced_together)
            return completed

        return before_commit

    def _changed_in_run(self, task_id: str, state: dict[str, Any]) -> bool:
        """Whether the task's coder commits in this run, as this process made them, add up to a
        change outside `.specflux/` (the diff the reviewer is then shown, taken once)."""
        commits = self._attempts.commits(state, task_id)
        git = self.manager.git
        if not commits or git is None:
            return False
        done = self._attempts.diff(git.root, commits[-1] + "^", git.head())
        return done.returncode == 0 and bool(done.stdout.strip())

    def _session_budget(self) -> int | None:
        """What the run's token budget leaves for this session (the session's own limit when less)."""
        if self._budget_left is None:
            return None
        return max(1, min(self._budget_left, self.manager.ws.config.agent.token_budget))

    @property
    def _steps(self) -> Path:
        return self.run.dir / "steps"

    def _run_tests(self):
        cfg = getattr(self.manager.ws.config, "validate", None)
        if cfg is None:
            return None
        from specflux.flow.steps.validate import run_validation

        return run_validation(self.manager.ws.root, cfg, edited=self._edited)

    # ----------------------------------------------------------------- reviewer

    def reviewer(self, step: dict[str, Any], state: dict[str, Any], known: tuple[str, dict] | None = None) -> StepResult:
        task_id = step["taskId"]
        started = time.monotonic()
        done = self._session(step, "reviewer", extra_context=self._change_to_review(task_id, state), known_status=known)
        failure = _api_failure(done)
        if failure is not None:
            return StepResult("ERROR", None, usage=done["usage"], duration_ms=_ms(started), error=failure)
        review = done["review"]
        refused = unjudged(review, self.manager, task_id)
        if review is None or refused:
            review = no_verdict(done, refused)
        output = {"taskId": task_id, **review}
        if tampering_notices(done):
            output["notices"] = tampering_notices(done)
        moment = done.get("moment")
        return StepResult("OK", output, usage=done["usage"], duration_ms=_ms(started), commit=done["commit"],
                          accepted=done.get("accepted"), wired=done.get("wired"),
                          moment=tuple(moment) if moment else None)

    def _change_to_review(self, task_id: str, state: dict[str, Any]) -> str:
        """The coder's change for this task in this run: the commits and their diff (truncated)."""
        git = self.manager.git
        parts = ["## The change to review"]
        coder = state.get("coderOutput") or {}
        checked = coder.get("selfValidation") or {}
        if checked:
            verdict = "passed" if checked.get("passed") else "FAILED"
            source = "the coder's own claim (no [validate] command)" if checked.get("claimedByAgent") else \
                "run by the harness"
            parts.append(f"Tests: {verdict} ({source}).")
        if git is None:
            return "\n".join(parts + ["(not a git repository: read the files named in the task's progress log)"])
        commits = self._attempts.commits(state, task_id)
        if commits is None:  # attempts this process did not see (a resumed run): git says which
            found = git.find_commits({"Specflux-Run": self.run.id, "Specflux-Task": task_id, "Specflux-Role": "coder"})
            commits = [c.sha for c in found]
        if not commits:
            return "\n".join(parts + ["(no commits from the coder in this run)"])
        done = self._attempts.diff(git.root, commits[-1] + "^", git.head())  # the coder's, if HEAD stayed
        diff = done.stdout if done.returncode == 0 else f"(git diff failed: {done.stderr.strip()})"
        if len(diff) > DIFF_LIMIT:
            diff = diff[:DIFF_LIMIT] + f"\n[... diff truncated at {DIFF_LIMIT} characters; read the files ...]"
        return "\n".join(parts + ["```diff", diff.rstrip(), "```"])

    # ----------------------------------------------------------------- validate

    def validate(self, step: dict[str, Any]) -> StepResult:
        started = time.monotonic()
        validation = self._run_tests()
        if validation is None:
            output = {"passed": True, "passRate": None, "coverage": None, "failedTests": [],
                      "note": "no [validate] section in .specflux/config.toml: nothing was run"}
            return StepResult("OK", output, duration_ms=_ms(started))
        return StepResult("OK", validation.to_state(), duration_ms=_ms(started))

    # ----------------------------------------------------------------- plumbing

    def _commits(self) -> bool:
        return self.manager.git is not None

    def _trailers(self, role: str, step: dict[str, Any]) -> dict[str, str]:
        return {"Specflux-Run": self.run.id, "Specflux-Role": role, "Specflux-Step": step["stepId"]}

    def _backend(self, step: dict[str, Any], role: str, handin=None):
        """The backend for this step's agent, and whether it edits the task file itself. `handin`:
        the step's hand-in channel (a reviewer's), whose variables go to this session alone."""
        task_id = step["taskId"]
        if self.agents.kind == "replay":
            from specflux.agent.anthropic_backend import replay_backend

            step_id, _, n = self._key.partition("#")
            source = self.agents.replay_from / "recordings" / (f"{step_id}.jsonl" if n in ("", "1")
                                                               else f"{step_id}-{n}.jsonl")
            return replay_backend(source), False
        if self.agents.is_cli:
            from specflux.agent.command_backend import CommandBackend
            from specflux.agent.presets import resolve

            env = {
                "SPECFLUX_TASK_FILE": str(self.manager.path(task_id)), "SPECFLUX_TASK_ID": task_id,
                "SPECFLUX_ROOT": str(self.manager.ws.root), "SPECFLUX_RUN": self.run.id, "SPECFLUX_ROLE": role,
                **(handin.env() if handin is not None else {}),
            }
            timeout = self.agents.timeout_s or self.manager.ws.config.agent.session_timeout_s
            prefix = f"[task {task_id}] " if self.cancel is not None else ""  # a parallel run's lanes
            config = self.manager.ws.config
            preset = resolve(self.agents.kind, self.agents.cmd, config.agents)
            return CommandBackend(self.agents.cmd or preset.command, timeout_s=timeout, env=env, cancel=self.cancel,
                                  prefix=prefix, preset=preset, role=role, model=self.agents.model,
                                  sandbox=self.agents.sandbox or config.agent.sandbox), role == "coder"
        from specflux.agent.anthropic_backend import live_backend

        self.run.recordings_dir.mkdir(parents=True, exist_ok=True)
        return live_backend(self.run.recording(self._key), task_id=task_id), False




def _usage(report) -> dict[str, Any]:
    """A session's usage as a step's event carries it (flow/state.py `add_usage` reads it)."""
    u = report.outcome.usage if report.outcome is not None else None
    if u is None:
        return {}
    if not u.known:
        return {"unknown": True, **({"why": u.why} if u.why else {})}
    out: dict[str, Any] = {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens,
                           "cacheReadTokens": u.cache_read_input_tokens, "cacheWriteTokens": u.cache_creation_input_tokens,
                           "costUsd": None if u.cost_usd is None else round(u.cost_usd, 6)}
    if u.model:
        out["model"] = u.model
    return out


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _code_summary(report) -> str:
    files = [p for p in report.changed if not p.startswith(".specflux/")]
    return (f"commit {report.commit[:12]}: " if report.commit else "") + (", ".join(files) or "no files changed")


def _api_failure(done: dict[str, Any]) -> AgentErrorInfo | None:
    """The session did not run, or stopped on a rate limit, an overload or a timeout of the API."""
    if done["session"] is None:
        return _error_info(done["error"] or "the session did not run")
    if done["stop"] != "error" or not done["error"]:
        return None
    info = _error_info(done["error"])
    return info if info.type != "ERROR" else None


def _error_info(message: str) -> AgentErrorInfo:
    """The kind of an agent error, from its message (the API's status codes)."""
    lowered = message.lower()
    if "429" in message or "rate limit" in lowered or "rate_limit" in lowered:
        return AgentErrorInfo("RATE_LIMIT", message)
    if "529" in message or "overloaded" in lowered:
        return AgentErrorInfo("OVERLOADED", message)
    if "timed out" in lowered or "timeout" in lowered:
        return AgentErrorInfo("TIMEOUT", message)
    return AgentErrorInfo("ERROR", message)


def failed_attempt(step: dict[str, Any], result: StepResult, why: str) -> StepResult:
    """`result` turned into a failed attempt (a coder's) or a refused verdict (a reviewer's), `why` said."""
    task_id = step.get("taskId")
    if step["kind"] == "reviewer":
        output = {"taskId": task_id, "approved": False, "criteriaResults": [],
                  "issues": [{"severity": "blocker", "description": why}]}
    else:
        output = {"taskId": task_id, "code": (result.output or {}).get("code", ""), "status": "needs_revision",
                  "selfValidation": {"passed": False, "issues": [why]}}
    return StepResult("OK", output, usage=result.usage, duration_ms=result.duration_ms, commit=result.commit,
                      stamp=result.stamp, refused=why)
