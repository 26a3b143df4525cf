# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The repository's scripts, run from its root as modules: `python -m scripts.gpu_check`, `python -m
scripts.get_real_model`, `python -m scripts.checkpoint_sizes`, `python -m scripts.soak`, `python -m
scripts.vllm_memory`."""
