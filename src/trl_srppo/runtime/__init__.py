# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""What keeps any training run alive, for `SRPPOTrainer` and TRL's `GRPOTrainer` alike, as one mixin
(`mixin.RuntimeMixin`, whose overrides `mixin.RUNTIME_HOOKS` lists): complete checkpoints and exact
resume (`checkpoints`, `resume`), preemption (`preemption`), reward deadlines (`reward_deadline`), checks at start and
at every step (`startup_checks`, `step_checks`), safe loading (`safe_loading`, `reward_models`), what the run shows
its user (`run_output`, with its memory: `memory`), vLLM's CPU set-up (`vllm_cpu`) and the end of a distributed run
(`teardown`)."""
