"""The tests, in a folder per concept; shared helpers in tests/helpers/."""

import pytest

# The shared helpers' asserts report as a test's do; imported before any of them.
pytest.register_assert_rewrite("tests.helpers")
