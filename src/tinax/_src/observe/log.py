"""The ``tinax`` logger: silent until the application configures logging."""

from __future__ import annotations

import logging

logger = logging.getLogger("tinax")
logger.addHandler(logging.NullHandler())  # silent until the application configures logging
