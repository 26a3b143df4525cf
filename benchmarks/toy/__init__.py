# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The CPU toy and its studies: the chain task and its warm-started two-layer model, the runs and the grid of
`make bench`, `make demo`, the defaults study and the prompt-sampling study."""
