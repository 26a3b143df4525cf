# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""matplotlib is an extra (`pip install 'trl-srppo[plot]'`): it draws the figures of `trl-srppo eval` and
`trl-srppo analyze`, and nothing else needs it. Without it, a run writes its numbers and tables and skips its figure
with one warning that names the extra ([`can_plot`])."""

import logging

__all__ = ["PLOT_EXTRA", "can_plot", "matplotlib_installed"]

logger = logging.getLogger(__name__)

PLOT_EXTRA = "pip install 'trl-srppo[plot]'"


def matplotlib_installed() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def can_plot(figure: str) -> bool:
    """Whether matplotlib can be imported; if not, warn that `figure` (a file name) is skipped and how to get it."""
    if not matplotlib_installed():
        logger.warning(
            f"matplotlib is not installed, so {figure} is not drawn (the numbers are all written): {PLOT_EXTRA}"
        )
        return False
    return True
