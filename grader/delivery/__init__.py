"""Delivery to the platforms courses use in 2026: a Gradescope autograder zip and Classroom 50.

- :mod:`grader.delivery.gradescope` builds the zip (``grader release --gradescope ZIP``);
  :mod:`grader.delivery.gradescope_run` is what its ``run_autograder`` runs, and
  :mod:`grader.delivery.gradescope_results` maps a scorecard to ``results.json``.
- :mod:`grader.delivery.classroom50` builds the template repository and the per-assignment
  autograder bundle (``grader release --classroom50 DIR``) and recognises the folder
  ``gh teacher download`` writes.
"""
