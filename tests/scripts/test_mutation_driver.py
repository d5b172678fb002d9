"""The mutation driver's own logic (scripts/mutation.py): sampling, score maths, name parsing.
No mutant runs here: mutation testing is nightly only."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_driver():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("mutation_driver", ROOT / "scripts/mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


driver = _load_driver()
NAMES = [f"reference_node.raft.log.xǁRaftLogǁappend__mutmut_{i}" for i in range(1, 301)]


def test_the_same_seed_draws_the_same_sample_whatever_the_listing_order() -> None:
    first = driver.sample_mutants(NAMES, 20, seed=1)
    assert first == driver.sample_mutants(list(reversed(NAMES)), 20, seed=1)
    assert len(first) == 20 and first == sorted(first) and set(first) <= set(NAMES)
    assert first != driver.sample_mutants(NAMES, 20, seed=2)


def test_a_mutant_added_elsewhere_leaves_the_rest_of_the_sample_in_place() -> None:
    before = driver.sample_mutants(NAMES, 20, seed=1)
    after = driver.sample_mutants([*NAMES, "reference_node.raft.ops.x_f__mutmut_1"], 20, seed=1)
    assert len(set(before) & set(after)) >= 19


def test_a_larger_sample_of_the_same_seed_contains_the_smaller_one() -> None:
    assert set(driver.sample_mutants(NAMES, 10, seed=1)) <= set(
        driver.sample_mutants(NAMES, 40, seed=1))


def test_a_sample_of_zero_or_more_than_there_are_takes_every_mutant() -> None:
    assert driver.sample_mutants(NAMES[:5], 0, seed=1) == sorted(NAMES[:5])
    assert driver.sample_mutants(NAMES[:5], 9, seed=1) == sorted(NAMES[:5])


def test_the_wilson_interval_matches_the_textbook_values_and_stays_in_range() -> None:
    # by hand: p = 0.75, n = 120, z = 1.96 -> centre 0.7422, half-width 0.0767
    low, high = driver.wilson_interval(90, 120)
    assert low == pytest.approx(0.6656, abs=1e-3) and high == pytest.approx(0.8189, abs=1e-3)
    assert driver.wilson_interval(120, 120)[1] == pytest.approx(1.0)
    assert driver.wilson_interval(120, 120)[0] == pytest.approx(0.969, abs=1e-3)
    assert driver.wilson_interval(0, 0) == (0.0, 1.0)


def test_timeouts_count_as_detected_and_unchecked_mutants_do_not() -> None:
    statuses = {"a": "killed", "b": "timeout", "c": "survived", "d": "not checked"}
    counts, score, _ = driver.summarise(statuses)
    assert counts["killed"] == 1 and counts["timeout"] == 1 and counts["survived"] == 1
    assert score == 0.5


def test_mutmut_exit_codes_map_to_the_report_statuses() -> None:
    assert [driver.status_of(c) for c in (1, 0, 36, -24, 33, None, 99)] == [
        "killed", "survived", "timeout", "timeout", "no tests", "not checked", "suspicious"]


def test_method_and_function_mutant_names_parse_to_their_source_file() -> None:
    method = driver.parse_mutant_name("reference_node.raft.core.xǁRaftCoreǁon_tick__mutmut_12")
    assert (method.cls, method.function, method.number) == ("RaftCore", "on_tick", 12)
    assert method.path == Path("reference_node/raft/core.py")
    function = driver.parse_mutant_name("reference_node.raft.election.x__send_vote__mutmut_3")
    assert (function.cls, function.function) == (None, "_send_vote")
    with pytest.raises(ValueError):
        driver.parse_mutant_name("reference_node.raft.core.on_tick")


def test_a_module_filter_names_core_files_and_never_the_simulator() -> None:
    assert driver.module_paths(["election"]) == ["reference_node/raft/election.py"]
    every = driver.module_paths([])
    assert "reference_node/raft/core.py" in every
    assert not any("/sim/" in p or p.endswith("simulate_cli.py") for p in every)
    with pytest.raises(SystemExit):
        driver.module_paths(["simulation"])


def test_the_workspace_settings_keep_the_projects_and_narrow_the_modules() -> None:
    settings = tomllib.loads(driver.workspace_pyproject(["reference_node/raft/log.py"]))["tool"]
    assert settings["mutmut"]["only_mutate"] == ["reference_node/raft/log.py"]
    assert "tests/test_mutation_sim_budget.py" in \
        settings["mutmut"]["pytest_add_cli_args_test_selection"]
    assert settings["pytest"]["ini_options"]["markers"]
