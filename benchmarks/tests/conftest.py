# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The benchmarks' tests run in the library tests' setting (one torch thread, the Hub offline: `tests/conftest.py`
sets it on import), with its fixtures and its vLLM check, so `pytest benchmarks/tests` alone behaves as
`pytest tests benchmarks/tests` does. The library's tests import nothing from here."""

from tests.conftest import problem_sets, public_data, pytest_collection_modifyitems, toy  # noqa: F401
