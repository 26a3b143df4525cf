# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""SR-PPO itself: the estimator as pure tensor functions (`core`), the config (`srppo_config`), the trainer
(`srppo_trainer`), the prefix critic (`critics`), prompt sampling before generation (`prompt_sampling`) and the
batch's logged critic and advantage metrics (`batch_metrics`)."""
