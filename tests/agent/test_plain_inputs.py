"""plain_inputs.py (`plain`, `review_of`) against the pydantic models they stand in for: where
the plain reading takes an input, the model takes it too, to the same values; where it does not,
the model judges (and words any refusal). Every case here is one an agent could send."""

from __future__ import annotations

import math

import pytest

from specflux.agent.handin import check_review
from specflux.agent.handin_rules import HandinError
from specflux.agent.plain_inputs import FIELDS, PlainReview, plain, review_of
from specflux.agent.tool_inputs import MODELS, ValidationError

TAKEN = [  # (tool, input): plain reads these, as the model would
    ("read_file", {"path": "src/a.py"}),
    ("read_file", {"path": ""}),  # (the tool refuses an empty path; the model lets it through)
    ("list_files", {}),
    ("list_files", {"path": "src"}),
    ("search", {"pattern": "def f"}),
    ("search", {"pattern": "x", "path": "src"}),
    ("write_file", {"path": "a.txt", "content": ""}),
    ("write_file", {"path": "a.txt", "content": "é\n\0"}),
    ("edit_file", {"path": "a.txt", "old": "a", "new": ""}),
    ("run_command", {"command": "pytest -q"}),
    ("run_command", {"command": "true", "timeout_s": 2.5}),
    ("run_command", {"command": "true", "timeout_s": None}),
    ("run_command", {"command": "true", "timeout_s": math.inf}),
    ("check_criterion", {"index": 2}),
    ("check_criterion", {"index": -1}),  # (the task side refuses it, as with the model)
    ("end_session", {"did": ["wrote f"]}),
    ("end_session", {"did": "one string is one item"}),
    ("end_session", {"did": ["a", ""], "issues": "none", "next": "tests"}),
    ("end_session", {"did": ["x"], "chain_output": None}),
    ("end_session", {"did": ["x"], "chain_output": {"summary": "f exists"}}),
    ("end_session", {"did": ["x"], "issues": "", "next": "", "chain_output": {"summary": "s", "downstream": "d"}}),
]

JUDGED = [  # (tool, input): plain leaves these to the model, which takes or refuses each
    ("read_file", {}),
    ("read_file", {"path": 3}),
    ("read_file", {"path": "a", "mode": "r"}),
    ("list_files", {"path": None}),
    ("write_file", {"path": "a"}),
    ("edit_file", {"path": "a", "old": "", "new": "x"}),
    ("run_command", {"command": ""}),
    ("run_command", {"command": "true", "timeout_s": 2}),  # an int: the model's to judge
    ("run_command", {"command": "true", "timeout_s": 0.0}),
    ("run_command", {"command": "true", "timeout_s": -1.0}),
    ("run_command", {"command": "true", "timeout_s": math.nan}),
    ("run_command", {"command": "true", "timeout_s": True}),
    ("check_criterion", {"index": True}),
    ("check_criterion", {"index": 1.0}),
    ("check_criterion", {"index": "1"}),
    ("end_session", {}),
    ("end_session", {"did": []}),
    ("end_session", {"did": [1]}),
    ("end_session", {"did": ("a",)}),
    ("end_session", {"did": ["x"], "issues": None}),
    ("end_session", {"did": ["x"], "extra": 1}),
    ("end_session", {"did": ["x"], "chain_output": {"downstream": "d"}}),
    ("end_session", {"did": ["x"], "chain_output": {"summary": ""}}),
    ("end_session", {"did": ["x"], "chain_output": {"summary": "s", "downstream": None}}),
    ("end_session", {"did": ["x"], "chain_output": {"summary": "s", "more": 1}}),
    ("end_session", {"did": ["x"], "chain_output": "s"}),
]


def dumped(value) -> dict:
    """An input as read, the model's instance or plain's, as a dict of plain values."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    out = dict(vars(value)) if not hasattr(value, "did") else {
        "did": value.did, "issues": value.issues, "next": value.next, "chain_output": value.chain_output}
    chain = out.get("chain_output")
    if chain is not None and not isinstance(chain, dict):
        out["chain_output"] = {"summary": chain.summary, "downstream": chain.downstream}
    return out


@pytest.mark.parametrize("tool, data", TAKEN)
def test_what_plain_takes_the_model_takes_to_the_same_values(tool, data):
    fits = plain(tool, data)
    assert fits is not None
    assert dumped(fits) == dumped(MODELS[tool].model_validate(data))


@pytest.mark.parametrize("tool, data", JUDGED)
def test_what_plain_leaves_goes_to_the_model(tool, data):
    assert plain(tool, data) is None
    try:
        MODELS[tool].model_validate(data)
    except ValidationError:
        pass  # refused in the model's words (test_agent_tools.py shows them to the agent)


def test_every_tool_with_a_model_is_read_plainly_or_left_to_it():
    assert set(MODELS) == {*FIELDS, "end_session"}
    assert plain("no_such_tool", {}) is None and plain("read_file", ["a"]) is None


VERDICTS_TAKEN = [
    {"approved": True, "criteria_results": [{"criterion": "1", "met": True}]},
    {"approved": False, "issues": [{"severity": "blocker", "description": "no test"}],
     "criteria_results": [{"criterion": "a test covers it", "met": False}]},
    {"approved": True, "issues": [{"severity": "minor", "description": "naming"}],
     "criteria_results": [{"criterion": "1", "met": True}, {"criterion": "#2", "met": True}]},
]

VERDICTS_JUDGED = [
    {"approved": "yes", "criteria_results": [{"criterion": "1", "met": True}]},
    {"approved": True, "criteria_results": [{"criterion": " 1 ", "met": True}]},  # text the model strips
    {"approved": True, "criteria_results": [{"criterion": "1", "met": 1}]},
    {"approved": True, "issues": [{"severity": "fatal", "description": "x"}], "criteria_results": []},
]

VERDICTS_REFUSED = [  # plain in shape, refused by the rules: the same words either way
    {"approved": True, "criteria_results": []},
    {"approved": True, "criteria_results": [{"criterion": "1", "met": False}]},
    {"approved": True, "issues": [{"severity": "blocker", "description": "broken"}],
     "criteria_results": [{"criterion": "1", "met": True}]},
]


@pytest.mark.parametrize("data", VERDICTS_TAKEN)
def test_a_plain_verdict_reads_as_the_review_model(data):
    review = review_of(data)
    assert isinstance(review, PlainReview)
    model = check_review(data)
    assert review.model_dump() == model.model_dump()
    assert review.approved == model.approved
    assert [(r.criterion, r.met) for r in review.criteria_results] == [(r.criterion, r.met) for r in model.criteria_results]
    assert [(i.severity, i.description) for i in review.issues] == [(i.severity, i.description) for i in model.issues]


@pytest.mark.parametrize("data", VERDICTS_JUDGED)
def test_a_verdict_plain_cannot_read_goes_to_the_model(data):
    try:
        model = check_review(data)
    except HandinError as e:
        with pytest.raises(HandinError) as refused:
            review_of(data)
        assert refused.value.message == e.message
    else:
        assert review_of(data).model_dump() == model.model_dump()


@pytest.mark.parametrize("data", VERDICTS_REFUSED)
def test_a_plain_verdict_that_contradicts_itself_is_refused_in_the_models_words(data):
    with pytest.raises(HandinError) as model:
        check_review(data)
    with pytest.raises(HandinError) as plain_one:
        review_of(data)
    assert plain_one.value.message == model.value.message
