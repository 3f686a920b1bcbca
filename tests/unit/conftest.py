"""Set up before the unit tests run (the only ones that draw text with Hypothesis)."""

from __future__ import annotations

import warnings

from hypothesis import find, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisSideeffectWarning


def pytest_configure() -> None:
    # Hypothesis builds its table of Unicode characters (about a second) the first time the
    # process draws text from the full alphabet, and keeps it under .hypothesis/. Built inside
    # a test's first draw, that second counts against the test's too_slow health check, which
    # failed on a machine or clone without the table (test_publish.py run alone). Built here,
    # on purpose: Hypothesis warns of that slow step at this point, and is not heard.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HypothesisSideeffectWarning)
        find(st.text(min_size=1), lambda _: True, settings=settings(database=None))
