# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""SmolLM2-135M-Instruct, converted once from a GGUF on PyPI (`model`), and its one-operation arithmetic task
(`task`): what the SmolLM2 studies and cost measurements share."""
