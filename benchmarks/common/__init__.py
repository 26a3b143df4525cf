# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The one layer every study of `benchmarks/` shares, and that imports no study: paired statistics (`stats`), the
report's cells and tables (`tables`), learning-curve lookups (`curves`), the spec of one run and its config fields
(`runspec`), pass@k of sampled rollouts (`scoring`), and the process a benchmark command runs in: the repository's
root, the git commit a report records, torch's threads and the offline Hub (`runs`)."""
