"""The fast tier: the tests a developer runs after each change, `pytest -m fast` (under 90 s on two
cores; the whole suite is for before a commit and for CI).

It is chosen here, in one place, rather than by decorators spread over the test files: what it
costs is seen at a glance, and tests/package/test_fast_tier.py checks that every floor of the code
(pyproject.toml's layers) and every folder of tests/ has tests in it, and that every entry below
still names a test module or a test function (so a rename cannot drop a floor from it unseen).

An entry is a test module (all of its tests) or `module::test_function` (all its parameters).
Put a module here when its tests take milliseconds; for a module of slow tests (whole runs,
kill -9 loops, real agent CLIs, browsers, wheel builds), the one or two tests that reach its floor
the cheapest way. `pytest -m fast --durations=10` shows what the tier spends.
"""

from __future__ import annotations

FAST = (
    # base: files, locks, terminal, interrupts
    "tests/base/test_terminal.py",
    "tests/base/test_interrupts.py",
    "tests/base/test_synced_together.py",
    "tests/base/test_exit_watch.py",
    "tests/base/test_tidy.py",
    "tests/base/test_not_durable_writes.py",
    # format: the lossless task file (property tests included)
    "tests/format/test_document.py",
    "tests/format/test_outline.py",
    "tests/format/test_merge_driver.py",
    # vcs: git, the session's commit
    "tests/vcs/test_vcs_states.py",
    "tests/vcs/test_refs.py",
    "tests/vcs/test_relative_paths.py",
    "tests/vcs/test_capture_known.py",
    "tests/vcs/test_vcs.py::test_commit_of_paths_known_new_adds_them_first_and_commits_the_same",
    # store: the task store
    "tests/store/test_chain.py",
    "tests/store/test_chain_output.py",
    "tests/store/test_lint.py",
    "tests/store/test_requirements.py",
    "tests/store/test_sources.py",
    "tests/store/test_summary_cache.py",
    "tests/store/test_parses.py",
    # agent: tools, backends, hand-ins, the environment
    "tests/agent/test_agent_tools.py",
    "tests/agent/test_command_backend.py",
    "tests/agent/test_context.py",
    "tests/agent/test_egress.py",
    "tests/agent/test_confine_held.py",
    "tests/agent/test_task_files_snapshot.py",
    "tests/agent/test_handin.py",
    "tests/agent/test_plain_inputs.py",
    "tests/agent/test_preflight.py",
    "tests/agent/test_scripted_servers.py",
    "tests/agent/test_session_guards.py",
    "tests/agent/test_usage_trust.py",
    "tests/agent/test_session.py::test_a_recorded_session_replays_to_identical_files_and_a_divergent_one_fails",
    # importers
    "tests/importers/test_import.py",
    "tests/importers/test_import_backlog.py",
    "tests/importers/test_import_duplicates.py",
    "tests/importers/test_import_harness.py",
    "tests/importers/test_import_speckit_shapes.py",
    "tests/importers/test_import_taskmaster.py",
    "tests/importers/test_import_whole.py",
    # flow: workflow files, specs, conditions, the validate step, and one whole run with retries
    "tests/flow/test_workflow_file.py",
    "tests/flow/test_specs.py",
    "tests/flow/test_attempts.py",
    "tests/flow/test_holds_read.py",
    "tests/flow/test_engine_lean.py",
    "tests/flow/test_fast_conditions.py",
    "tests/flow/test_validate.py",
    "tests/flow/test_flow.py::test_retries_exhausted_fail_the_task_and_block_its_dependents",
    "tests/flow/test_step_git_processes.py",
    "tests/flow/test_accept_in_commit.py::test_the_reviewer_commit_that_accepts_a_task_holds_its_completion_and_its_dependents",
    "tests/flow/test_accept_in_commit.py::test_a_decision_the_engine_refused_since_is_not_taken_over",
    # surface: what the surfaces share
    "tests/surface/test_surface.py",
    # board: the page's data and layout, and --serve reading only what changed (no browser)
    "tests/board/test_board.py::test_the_data_is_what_show_log_and_flow_status_say",
    "tests/board/test_board.py::test_layout_layers_by_longest_path_and_survives_cycles",
    "tests/board/test_board.py::test_serve_reads_again_only_the_files_and_history_that_changed",
    "tests/board/test_board.py::test_task_text_cannot_end_the_script_element_it_is_embedded_in",
    # mcp: the server's reads and its refusals
    "tests/mcp/test_mcp.py::test_reads_are_the_cli_json_shapes",
    "tests/mcp/test_mcp.py::test_an_unknown_tool_name_is_a_usage_error_listing_the_valid_ones",
    # cli
    "tests/cli/test_cli.py",
    # demo: the whole offline story once
    "tests/demo/test_demo.py::test_the_demo_tells_the_whole_story_offline",
    # package: the house rules, lazy imports, the docs' claims, and this tier's own check
    "tests/package/test_house.py",
    "tests/package/test_imports.py",
    "tests/package/test_docs.py",
    "tests/package/test_fast_tier.py",
)


def is_fast(nodeid: str) -> bool:
    """Whether the test `nodeid` (as pytest names it from the repository's root) is in the tier."""
    module, _, name = nodeid.partition("::")
    function = name.split("[", 1)[0]
    return module in _MODULES or f"{module}::{function}" in _FUNCTIONS


_MODULES = frozenset(e for e in FAST if "::" not in e)
_FUNCTIONS = frozenset(e for e in FAST if "::" in e)
