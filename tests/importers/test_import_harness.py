"""Harness import: the two real feature_list.json shapes of the corpus, with their progress logs."""

from __future__ import annotations

import pytest
from conftest import CORPUS

from specflux.importers.harness import parse

PROGRESS = CORPUS / "progress"


def corpus_pair(repo: str) -> tuple[str, str]:
    features, progress = PROGRESS / f"{repo}__feature_list.json", PROGRESS / f"{repo}__claude-progress.txt"
    if not features.is_file():
        pytest.skip(f"corpus file {features} not found (CI has the corpus beside the checkout)")
    return features.read_text(encoding="utf-8"), progress.read_text(encoding="utf-8")


def messages(result) -> list[str]:
    return [str(w) for w in result.warnings]


def test_every_feature_list_of_the_corpus_imports(corpus_files):
    lists = [p for p in corpus_files if p.name.endswith("feature_list.json")]
    assert len(lists) >= 2
    for path in lists:
        result = parse(path.read_text(encoding="utf-8"), path.name)
        assert result.drafts and result.warnings == [], path.name


def test_xtuner_array_of_features_with_steps():
    features, progress = corpus_pair("xtuner")
    result = parse(features, "feature_list.json", progress)
    assert result.warnings == []
    assert [d.task_id for d in result.drafts] == [f"F{n}" for n in range(1, 10)]
    assert [d.status for d in result.drafts] == ["complete"] * 7 + ["pending"] * 2
    first = result.drafts[0]
    assert len(first.criteria) == 6 and first.checked == [True] * 6
    assert first.criteria[0].startswith("change AsyncProduceStrategy.produce_batch() to return a ProduceBatchStatus")
    assert not any(c.lower().startswith("step") for d in result.drafts for c in d.criteria)
    assert first.requirements.startswith("Refactor AsyncProduceStrategy in xtuner/v1/rl/agent_loop/producer.py")
    assert first.title.endswith("...") and len(first.title) <= 103
    assert first.metadata == {
        "source": {"path": "feature_list.json", "id": 0},
        "category": "modify",
        "progress": "claude-progress.txt",
    }
    assert result.drafts[5].metadata["category"] == "add"
    assert result.drafts[7].checked == [False] * 4
    assert [d.line for d in result.drafts[:3]] == [2, 15, 26]  # the feature's `{`: it has no "id"


def test_kasmproxy_object_with_ids_and_extra_keys():
    features, progress = corpus_pair("kasmproxy")
    result = parse(features, "proxy/feature_list.json", progress)
    assert result.warnings == []
    assert [d.task_id for d in result.drafts] == [
        "ROUTE_SSH", "ROUTE_FILE", "PATH_TRANSFORM", "VNC_PW_AUTH", "AUTH_CACHING", "HTTP_PROTOCOL",
        "WEBSOCKET_SUPPORT", "SUBPATH_ROUTING", "ROUTE_FILES_DIRECT",
    ]
    assert all(d.status == "complete" and d.checked == [True] for d in result.drafts)
    ssh = result.drafts[0]
    assert ssh.title == "/ssh endpoint routing to localhost:9999"
    assert ssh.criteria == ["/ssh endpoint routing to localhost:9999"]  # no steps: the description
    assert ssh.line == 6
    assert ssh.metadata == {
        "source": {"path": "proxy/feature_list.json", "id": "ROUTE_SSH"},
        "harness": {"verified_via": "endpoint_test", "status_code": 200},
        "progress": "proxy/claude-progress.txt",
    }
    assert result.drafts[2].metadata["harness"]["transformations"][0] == {"from": "/file", "to": "/files"}


def test_without_progress_text_there_is_no_pointer():
    features, _ = corpus_pair("kasmproxy")
    assert all("progress" not in d.metadata for d in parse(features, "feature_list.json").drafts)


def test_same_text_same_drafts():
    features, progress = corpus_pair("xtuner")
    assert parse(features, "f.json", progress).drafts == parse(features, "f.json", progress).drafts


def test_invalid_and_duplicate_ids():
    text = """[
  {"id": "bad id!", "description": "One", "steps": ["Step 1: a", "step 2 - b", "c"], "passes": false},
  {"id": "F1", "description": "Two", "passes": "true"},
  {"description": "Three", "passes": 1},
  "not a feature"
]"""
    result = parse(text, "feature_list.json")
    assert [(d.task_id, d.status) for d in result.drafts] == [("F1", "pending"), ("F3", "pending")]
    assert result.drafts[0].criteria == ["a", "b", "c"]
    assert result.drafts[0].metadata["source"] == {"path": "feature_list.json", "id": 0}
    assert messages(result) == [
        "feature_list.json:2: feature id 'bad id!' is not a task id; imported as F1",
        "feature_list.json:3: feature id F1 appears twice; kept the first",
        "feature_list.json:4: feature F3: passes 1 is not true or false; imported as not passing",
        "feature_list.json: feature 4 is not an object; skipped",  # only objects have recorded positions
    ]


def test_not_json_and_no_features_are_reported():
    assert messages(parse('[{"description": "x",}]', "feature_list.json")) == [
        "feature_list.json:1: not valid JSON: Expecting property name enclosed in double quotes"]
    assert messages(parse('{"version": "1.0"}', "feature_list.json")) == [
        'feature_list.json:1: no features: expected a JSON array or an object with a "features" array']


@pytest.mark.parametrize("text", ["[]", "{}", "null", '{"features": [{}]}', '[{"steps": "one step", "passes": null}]',
                                  '[{"id": 3, "steps": [null, 4], "description": null}]'])
def test_odd_files_do_not_raise(text):
    parse(text, "feature_list.json", "")
