"""Attention-mechanisms exercise pack and autograder.

Where things live (the layout tells the architecture):

- ``grader.intake``      where a submission enters (directory, .py, archive) and is normalised;
- ``grader.student``     the only door to student code: the ``student`` proxy and its backends;
- ``grader.sandbox``     where student code is isolated (wire format, worker, launchers);
- ``grader.testing``     the pytest plugin the public and hidden suites run under;
- ``grader.scoring``     where results are scored and the scorecard is written.
"""

from __future__ import annotations

__version__ = "0.1.0"
