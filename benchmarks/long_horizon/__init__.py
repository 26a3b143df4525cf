# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The long-horizon study on SmolLM2-135M-Instruct: the Pass@k weight and the separate critic over 160 off-policy
updates, with resumable runs (`python -m benchmarks.long_horizon.study`)."""
