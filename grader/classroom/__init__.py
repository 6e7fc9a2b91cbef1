"""Students and CI: ``grader check`` (local, public tests), ``grader ci`` (GitHub Classroom runner JSON),
``grader release`` (the student template repository and an nbgrader course).

- ``check``     runs the public tests in this process against ``./exercises`` and explains failures;
- ``ci``        runs ``check`` in a child process with a time limit and emits the Classroom runner JSON;
- ``release``   builds the student repository (no solutions, no hidden tests);
- ``notebooks`` writes the nbgrader ``source/`` notebooks; ``nbruntime`` runs their test cells;
- ``texts``     the files the release writes (README, pyproject, workflow), as templates.
"""

from __future__ import annotations
