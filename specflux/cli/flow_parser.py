"""The arguments of `specflux flow ...` and of the agent CLIs' hand-ins (`submit-review`,
`submit-tasks`), with help and examples. `parser.build_parser` adds them only when the command line
asks for one of them or for help, so that `specflux list` does not pay for building them."""

from __future__ import annotations

import argparse

HANDIN_SHAPES = {
    "review": """\
the JSON (one object):
  approved          true only when every criterion is met and no issue is a blocker
  criteria_results  one {"criterion", "met"} for each acceptance criterion of the task, named by
                    its number ("1") or its exact text
  issues            optional: {"severity": "blocker" | "major" | "minor", "description"}

example:
  specflux submit-review --json - <<'EOF'
  {"approved": false,
   "criteria_results": [{"criterion": "1", "met": true}, {"criterion": "2", "met": false}],
   "issues": [{"severity": "major", "description": "add() ignores negative numbers"}]}
  EOF""",
    "tasks": """\
the JSON (one object):
  tasks    [{"key", "title", "requirements", "acceptance_criteria": [...], "priority": 1-5,
             "complexity": "simple" | "medium" | "complex", "dependencies": [keys]}]
  summary  optional: {"totalTasks", "byPriority", "estimatedComplexity": "hours" | "days" | "weeks"}

example:
  specflux submit-tasks --json - <<'EOF'
  {"tasks": [{"key": "parse", "title": "Parse the input", "requirements": "Read CSV rows",
              "acceptance_criteria": ["rows with quotes parse"], "priority": 1,
              "complexity": "simple", "dependencies": []}]}
  EOF""",
}

_RUN_HELP = "the run's id, as `flow list` shows it (default: the latest run)"


def add_flow_parsers(sub) -> None:
    """`flow` and its commands, and the agent CLIs' hand-ins (`submit-review`, `submit-tasks`), added
    to `specflux`'s subparsers `sub`."""
    flow = sub.add_parser("flow", help="workflow runs over many tasks: start, status, pause, resume, stop, ...",
                          description="Workflow runs: a queue of tasks through coder, validate, reviewer and "
                                      "approval roles, under control enforced in code.")
    fsub = flow.add_subparsers(dest="flow_command", metavar="FLOW_COMMAND",
                               help="`specflux flow FLOW_COMMAND --help` for its options")

    s = fsub.add_parser("start", help="create a run and drive it in the foreground",
                        description="Create a workflow run and drive it in the foreground: each task through the "
                                    "workflow's roles until it is accepted or given up.",
                        formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""\
examples:
  specflux flow start                      # every task not complete, in dependency order
  specflux flow start 4 5 --agent claude   # Claude Code in every role
  specflux flow start --all --workflow strict --max-iterations 40 --token-budget 2000000
  specflux flow start --prd docs/prd.md    # plan the tasks first, then run them""")
    s.add_argument("ids", nargs="*", metavar="ID", help="tasks to run (default: every task not complete)")
    s.add_argument("--all", action="store_true", help="every task not complete")
    s.add_argument("--prd", metavar="PRD", help="plan the tasks of this requirements document first (the planner "
                   "role), then run them")
    s.add_argument("--workflow", default="queue", metavar="NAME|PATH", help="built-in `queue`, a name in "
                   ".specflux/workflows/, or a .toml path")
    from specflux.agent.presets import AgentNames, agent_help

    s.add_argument("--agent", choices=AgentNames(), default="anthropic", metavar="AGENT",
                   help=agent_help() + "; an agent CLI takes every role")
    s.add_argument("--cmd", help="the agent command line, for every role (--agent command)")
    s.add_argument("--no-sandbox", action="store_true", help="run the agent CLI unconfined (by default it writes "
                   "only inside the repository or the lane's worktree, as [agent] sandbox says)")
    s.add_argument("--model", help="the model (default: [agent] model in config.toml)")
    s.add_argument("--max-iterations", type=int, metavar="N", help="steps the run may take in all")
    s.add_argument("--token-budget", type=int, metavar="N", help="tokens the run may spend in all")
    s.add_argument("--budget-usd", type=float, metavar="X", help="US dollars the run may spend in all (priced by the "
                   "agent CLI's own figure, else the pricing table; default: [flow] budget_usd, none)")
    s.add_argument("--allow-unmetered", action="store_true", help="run under --budget-usd (or [flow] budget_usd) "
                   "even though the agent's output may not say what it spent (--agent command, a CLI with no usage "
                   "reader): the budget may then not bind (docs/budgets.md)")
    s.add_argument("--parallel", type=int, metavar="N", help="work on up to N tasks whose dependencies are complete "
                   "at once, each coder attempt in its own git worktree, merged back by the run (default: [flow] "
                   "parallel, 1)")
    s.add_argument("--remote", metavar="NAME", help="work as one worker of a queue shared through this git remote: "
                   "claim a ready task, run it, integrate it into the remote branch, repeat (with --all)")
    s.add_argument("--worker", metavar="W", help="this worker's name in its claims (default: host:pid)")
    s.add_argument("--lease", type=float, metavar="S", help="seconds a claim lasts unless renewed (default: "
                   "[remote] lease_s, 60)")
    s.add_argument("--wait", type=float, nargs="?", const=-1.0, metavar="S", help="with --remote: when nothing is "
                   "ready and no one works on anything that could open it (an unconfirmed completion, a failed or "
                   "blocked dependency), wait up to S seconds for it to open instead of stopping (default S: "
                   "[remote] give_up_s)")

    s = fsub.add_parser("list", help="runs with status, tasks done/total, iterations, started")
    s.add_argument("--json", action="store_true", help="[{runId, status, tasksDone, tasksTotal, iterations, started, "
                   "workflow}] as JSON")

    s = fsub.add_parser("status", help="the run state (default: the latest run)")
    s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s.add_argument("--json", action="store_true", help="the whole run state as JSON (CONTRACT names)")
    s.add_argument("--remote", metavar="NAME", help="the shared queue on this git remote instead: which worker holds "
                   "which task, and the metrics of every worker's runs")

    for name, text in (("pause", "pause after the current step"), ("stop", "end the run now")):
        s = fsub.add_parser(name, help=text)
        s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s = fsub.add_parser("resume", help="continue a paused, waiting or crashed run in the foreground")
    s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s.add_argument("--allow-changed-workflow", action="store_true",
                   help="resume even though the workflow file changed since the run started")
    s = fsub.add_parser("approve", help="answer an open approval step: yes (the run continues)")
    s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s.add_argument("--note", metavar="TEXT", help="a remark recorded with the approval")
    s = fsub.add_parser("reject", help="answer an open approval step: no, with what to change")
    s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s.add_argument("--note", metavar="TEXT", required=True, help="what to change (the coder's next try reads it)")

    s = fsub.add_parser("log", help="the run's narrative, one line per step that matters")
    s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s.add_argument("--json", action="store_true", help="[{seq, at, type, text}] as JSON")

    s = fsub.add_parser("replay", help="re-run a whole run offline from its recordings, in a fresh clone at its base "
                        "commit; exit 1 naming the first step that differs")
    s.add_argument("run", nargs="?", metavar="RUN", help=_RUN_HELP)
    s.add_argument("--into", metavar="DIR", help="where to clone (default: a new temporary folder)")

    for kind in ("review", "tasks"):
        what = "a reviewer verdict" if kind == "review" else "a planner task list"
        about = (f"Hand in {what} from the agent CLI session a run started for this step (it sets SPECFLUX_HANDIN, "
                 "SPECFLUX_HANDIN_KEY and SPECFLUX_HANDIN_STEP; a hand-in from anywhere else is refused). Handing "
                 "in again replaces the earlier one. Exit 0: recorded; 1: refused, saying why; 2: not inside such "
                 "a session.")
        s = sub.add_parser(f"submit-{kind}", help=f"hand in {what} from an agent CLI inside a run (JSON, as the "
                           f"submit_{kind} tool takes)", description=_wrapped(about), epilog=HANDIN_SHAPES[kind],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        s.add_argument("--json", required=True, metavar="FILE|-", help="the JSON file, or - for standard input")


def _wrapped(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=96))
