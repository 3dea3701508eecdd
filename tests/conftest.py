"""Shared test configuration.

Hypothesis profiles: ``ci`` (default: bounded, derandomized so CI is repeatable),
``dev`` (quick local runs) and ``thorough`` (long runs). Pick one with
``HYPOTHESIS_PROFILE=thorough python -m pytest``.
"""

import logging
import os

import pytest

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=10, deadline=None)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def restore_fusionlang_logging():
    """fusionlang's logging is process-wide (--log, instrument.configure): a test that sets
    it leaves it as it found it (silent)."""
    from fusionlang import instrument  # here: conftest itself stays free of fusionlang's imports

    root = logging.getLogger(instrument.ROOT)
    level, handlers, propagate = root.level, list(root.handlers), root.propagate
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    root.propagate = propagate
