# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The cost measurements: a training step phase by phase (`step_cost`, `make bench-step`), the real model's forward
and generation (`real_model_cost`), an evaluation's prefill (`eval_prefill`) and a checkpoint's size
(`checkpoint_size`)."""
