# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The verifiable tasks: their registry (`registry`: fields, prompt templates, row checks, verifiers), the loading of
a task's rows into TRL prompts (`data`) and the CPU toy family (`toy`: a tiny model and the `chain` task's data)."""
