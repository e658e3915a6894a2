"""The workflows specflux ships, as TOML text: `queue`, seed 000's edges (workflow_file.py loads
them as it loads a user's file, which may override one by its name).

Their conditions are checked by the suite rather than at each load (`built_in_conditions`,
tests/flow/test_workflow_file.py): a run of a built-in workflow then never imports JSONata unless
a state the fast conditions leave to it comes.
"""

from __future__ import annotations

import sys
from functools import lru_cache

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN_QUEUE = '''\
# The built-in workflow: seed 000's five edges, in its order, with its ids, conditions and limits.
name = "queue"
version = "1"
start = "coder"

# The seed's spec agent is the planner here: a run started from a PRD begins with it.
[[edges]]
id = "spec-to-coder"
from = "planner"
to = "coder"

[[edges]]
id = "coder-retry"
from = "coder"
to = "coder"
when = "coderOutput.selfValidation.passed = false"
max_iterations = 3

[[edges]]
id = "coder-to-reviewer"
from = "coder"
to = "reviewer"
when = "coderOutput.selfValidation.passed = true"

[[edges]]
id = "reviewer-reject"
from = "reviewer"
to = "coder"
when = "reviewerOutput.approved = false"
max_iterations = 2

# Approved with tasks left: accept this task and start the coder on the next one. Approved on the
# last task: no edge fires and the run ends.
[[edges]]
id = "next-task"
from = "reviewer"
to = "coder"
when = "reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1"
task = "next"
'''
BUILTIN = {"queue": BUILTIN_QUEUE}


@lru_cache(maxsize=1)
def built_in_conditions() -> frozenset[str]:
    """Every `when` of the built-in workflows, as written."""
    return frozenset(edge["when"] for text in BUILTIN.values() for edge in tomllib.loads(text).get("edges", ())
                     if "when" in edge)
