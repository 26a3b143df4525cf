# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""SR-PPO (single-rollout Pass@k policy optimization) for Hugging Face TRL."""

__version__ = "0.1.0"

_LAZY = {
    "SRPPOConfig": "trl_srppo.method.srppo_config",
    "SRPPOTrainer": "trl_srppo.method.srppo_trainer",
}

__all__ = ["SRPPOConfig", "SRPPOTrainer", "__version__"]


def __getattr__(name):
    # Lazy so that `import trl_srppo.method.core` or `trl_srppo.rewards` does not pay for importing TRL.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trl_srppo' has no attribute {name!r}")
