"""Every hostile submission of test_hostile.py again, each worker forked from a zygote: the same tests, the
same checks, and each scorecard shows that every worker (restarts after a kill included) was a fork."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grader.sandbox.zygote_client import Zygote
from tests.project.test_hostile import (
    graded,
    test_a_flood_of_output_is_capped_and_never_reaches_the_scorecard,
    test_a_protocol_violation_fails_the_rest_of_the_exercise_and_is_reported,
    test_a_worker_sees_the_same_bare_process_whether_forked_or_exec_d,
    test_forged_grader_labels_are_shown_as_the_students_own_exceptions,
    test_hostile_module_earns_nothing_and_others_keep_their_points,
    test_missing_module_is_a_clear_not_found,
    test_network_is_unreachable_inside_the_sandbox,
    test_secrets_are_absent_inside_the_sandbox,
    test_timeouts_and_crashes_are_recorded_as_incidents,
)

pytestmark = pytest.mark.cost(65)  # seconds on 2 cores: started early (tests/project/conftest.py)

__all__ = ["graded", "test_a_flood_of_output_is_capped_and_never_reaches_the_scorecard",
           "test_a_protocol_violation_fails_the_rest_of_the_exercise_and_is_reported",
           "test_a_worker_sees_the_same_bare_process_whether_forked_or_exec_d",
           "test_forged_grader_labels_are_shown_as_the_students_own_exceptions",
           "test_hostile_module_earns_nothing_and_others_keep_their_points", "test_missing_module_is_a_clear_not_found",
           "test_network_is_unreachable_inside_the_sandbox", "test_secrets_are_absent_inside_the_sandbox",
           "test_timeouts_and_crashes_are_recorded_as_incidents"]


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    made = Zygote()
    assert made.wait_ready(), "the zygote did not start"
    yield made
    made.close()
