"""The shape of the run state as workflow conditions may read it, and the walk that checks a
compiled JSONata condition against it: every field path it reads must exist (CONTRACT section 5),
and it may not call what gives another answer in a replay. A typo in a field name would otherwise
make a condition quietly false, and the run would end early for no visible reason.
"""

from __future__ import annotations

from typing import Any, Mapping

# Functions whose answer depends on the clock or chance: a replayed run would decide differently.
NONDETERMINISTIC = ("now", "millis", "random")

# --- the shape of the run state (CONTRACT section 5), as far as conditions may read it ---------

LEAF = "leaf"  # a value without fields: string, number, boolean, or a list of those
ANY = "any"  # a record whose keys are data (task ids, artifact keys) or whose shape is open

_TASK = dict.fromkeys(("id", "title", "status", "priority", "complexity", "acceptanceCriteria"), LEAF)
STATE_SCHEMA: dict[str, Any] = {
    "runId": LEAF,
    "status": LEAF,
    "workflow": ANY,
    "tasks": _TASK,  # a list: JSONata maps paths over lists, so `tasks.id` reads each task's id
    "currentTaskIndex": LEAF,
    "taskAttempts": ANY,  # {taskId: attempts}
    "currentAttempts": LEAF,
    "coderOutput": {
        "taskId": LEAF, "code": LEAF, "status": LEAF,
        "selfValidation": {"passed": LEAF, "issues": LEAF},
    },
    "reviewerOutput": {
        "taskId": LEAF, "approved": LEAF,
        "issues": {"severity": LEAF, "description": LEAF},
        "criteriaResults": {"criterion": LEAF, "met": LEAF},
    },
    "validation": dict.fromkeys(("passed", "passRate", "coverage", "failedTests"), LEAF),
    "metrics": dict.fromkeys(("tasksCompleted", "tasksFailed", "totalAttempts", "totalReviews",
                              "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
                              "costUsd", "costUnknown", "usageUnknown", "durationMs"), LEAF),
    "iteration": LEAF,
    "maxIterations": LEAF,
    "artifacts": ANY,
    "openSteps": ANY,
    "pausedFor": LEAF,
    "failureReason": LEAF,
    "approvalOutput": {"approved": LEAF, "note": LEAF},
    "plannerOutput": ANY,
}
STATE_FIELDS = tuple(STATE_SCHEMA)


class _Reads:
    """Walks a compiled JSONata expression and checks every field path it reads against
    STATE_SCHEMA.

    A context is (schema, dotted path so far): the root at the top, a task inside `tasks[...]`,
    None where it cannot be known (after `*`, `**`, `%`, a variable, a function's result). Names
    read in an unknown context are not checked, so the walk never reports a field that exists;
    it can miss a typo there, which is the price of not guessing.
    """

    # Parts of a node that read the same context as the node itself.
    _SAME = ("lhs", "rhs", "expressions", "arguments", "condition", "then", "_else", "expression",
             "lhs_object", "rhs_object", "terms", "update", "delete", "group", "expr", "procedure")
    # Filters on something other than a path step (`(tasks)[...]`, `$x[...]`) read its items,
    # whose shape is not known here.
    _ITEMS = ("stages", "predicate")

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.state = False  # whether anything is read from the state at all

    def walk(self, node: Any, ctx) -> None:
        if isinstance(node, (list, tuple)):
            for item in node:
                self.walk(item, ctx)
            return
        kind = getattr(node, "type", None)
        if kind == "path":
            self._path(node, ctx)
        elif kind == "name":
            self._step(ctx, node.value)
        elif kind == "variable":
            if node.value in ("", "$"):  # `$` (the context) and `$$` (the root) read the state
                self.state = True
        elif kind == "lambda":
            self.walk(getattr(node, "body", None), None)
        elif kind == "function" and getattr(getattr(node, "procedure", None), "type", None) == "variable" \
                and node.procedure.value in NONDETERMINISTIC:
            self.problems.append(f"calls ${node.procedure.value}(), which gives another answer when the run "
                                 "is replayed: a condition must depend on the run state only")
        else:
            self._children(node, ctx)

    def _children(self, node: Any, ctx) -> None:
        if node is None or isinstance(node, (str, int, float, bool)):
            return
        for names, context in ((self._SAME, ctx), (self._ITEMS, None)):
            for name in names:
                child = getattr(node, name, None)
                if child is not None and not isinstance(child, (str, int, float, bool)):
                    self.walk(child, context)

    def _path(self, node: Any, ctx) -> None:
        for index, step in enumerate(getattr(node, "steps", None) or ()):
            kind = getattr(step, "type", None)
            if kind == "name":
                ctx = self._step(ctx, step.value)
            elif kind == "variable" and index == 0 and step.value == "":
                self.state = True  # `$.x`: the context itself
            elif kind == "variable" and index == 0 and step.value == "$":
                self.state, ctx = True, (STATE_SCHEMA, ())  # `$$.x`: the root
            elif kind == "sort":
                self._children(step, ctx)  # sort terms read each item, and the items stay the same
            else:  # a block, function, wildcard, parent, variable: what comes out is not known
                self.walk(step, ctx)
                ctx = None
            for stage in getattr(step, "stages", None) or ():  # `tasks[...]`: each task
                self.walk(getattr(stage, "expr", None), ctx)
            if getattr(step, "focus", None) or getattr(step, "index", None) or getattr(step, "tuple", None):
                ctx = None  # `@$x`, `#$i` and parent-tracking change what later steps are relative to
        self.walk(getattr(node, "group", None), ctx)

    def _step(self, ctx, name: str):
        """The context after reading field `name` in `ctx`, or None when that is not known."""
        self.state = True
        if ctx is None:
            return None
        schema, trail = ctx
        here = ".".join(trail)
        if schema is ANY:
            return (ANY, (*trail, name))
        if schema is LEAF:
            self.problems.append(f"reads `{here}.{name}`, but `{here}` has no fields")
            return None
        if name not in schema:
            self.problems.append(_unknown_field(schema, trail, name))
            return None
        return (schema[name], (*trail, name))


def _unknown_field(schema: Mapping[str, Any], trail: tuple[str, ...], name: str) -> str:
    dotted = ".".join((*trail, name))
    hint = close_matches(name, list(schema), n=1)
    maybe = f" (did you mean `{'.'.join((*trail, hint[0]))}`?)" if hint else ""
    if trail:
        return (f"reads `{dotted}`, which the run state does not have{maybe}: "
                f"`{'.'.join(trail)}` has {', '.join(schema)}")
    return f"reads `{dotted}`, which the run state does not have{maybe}: it has {', '.join(schema)}"


def close_matches(word: str, choices, n: int = 1) -> list[str]:
    """The nearest of `choices` to a misspelt `word` (difflib loads only where one is misspelt)."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n)
