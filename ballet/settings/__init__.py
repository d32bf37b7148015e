"""Settings package: ``base`` (both modes), ``test`` and ``production``."""
