"""The hint a test gives explicitly for the feedback of a student exception:
``@pytest.mark.hint("...")``.

A student exception is followed by its diagnosis when there is one
(:func:`grader.testing.diagnosis.diagnosis_of`), else by this hint if the test gives one. The hint
must be neutral (what the test needs, such as an import it relies on), never a guess at the mistake:
a test used to borrow the first hint of its own source, which told every student whose code raised
there about one particular mistake, whatever they had done.
"""

from __future__ import annotations

import pytest


def hint_of(item: pytest.Item) -> str | None:
    """The hint to show with a student exception raised in ``item`` (None: the test gives none)."""
    marker = item.get_closest_marker("hint")
    return str(marker.args[0]) if marker is not None and marker.args else None
