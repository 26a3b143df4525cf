# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The critic's cold start on SmolLM2-135M-Instruct: the `wide` testbed, the cold-start options, and the comparison
with TRL's single-rollout peer (`python -m benchmarks.cold_start.study`)."""
