"""The hostile class of test_hostile_class.py graded from the repository root (where the grader's own packages
sit in the working directory) with ``--warm off``: every sandboxed worker, restarts after a kill included,
freshly exec'd. The same tests on the same class; each scorecard shows that no worker was a fork."""

from __future__ import annotations

import pytest

from tests.project.conftest import ROOT
from tests.project.hostile_class import Graded, build, grade_class, needs_namespace
from tests.project.test_hostile_class import (
    test_a_flood_of_output_is_capped_and_never_reaches_the_scorecard,
    test_a_protocol_violation_fails_the_rest_of_the_exercise_and_is_reported,
    test_a_worker_sees_the_same_bare_process_whether_forked_or_exec_d,
    test_each_integrity_trick_earns_nothing_and_is_reported,
    test_forged_grader_labels_are_shown_as_the_students_own_exceptions,
    test_hostile_module_earns_nothing_and_others_keep_their_points,
    test_missing_module_is_a_clear_not_found,
    test_network_is_unreachable_inside_the_sandbox,
    test_secrets_are_absent_inside_the_sandbox,
    test_the_outside_memory_figure_fails_a_full_matrix_hidden_from_the_dispatch_mode,
    test_the_whole_class_is_graded_and_every_output_written,
    test_timeouts_and_crashes_are_recorded_as_incidents,
)

pytestmark = [pytest.mark.cost(200), needs_namespace]  # seconds on 2 cores: started early (tests/project/conftest.py)

__all__ = ["test_a_flood_of_output_is_capped_and_never_reaches_the_scorecard",
           "test_a_protocol_violation_fails_the_rest_of_the_exercise_and_is_reported",
           "test_a_worker_sees_the_same_bare_process_whether_forked_or_exec_d",
           "test_each_integrity_trick_earns_nothing_and_is_reported",
           "test_forged_grader_labels_are_shown_as_the_students_own_exceptions",
           "test_hostile_module_earns_nothing_and_others_keep_their_points", "test_missing_module_is_a_clear_not_found",
           "test_network_is_unreachable_inside_the_sandbox", "test_secrets_are_absent_inside_the_sandbox",
           "test_the_outside_memory_figure_fails_a_full_matrix_hidden_from_the_dispatch_mode",
           "test_the_whole_class_is_graded_and_every_output_written", "test_timeouts_and_crashes_are_recorded_as_incidents"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    folder = tmp_path_factory.mktemp("hostile-class") / "class"
    attacked = build(folder)
    return grade_class(folder, attacked, cwd=ROOT, target=str(folder), out=folder.parent / "out", warm="off")
