"""Ballet: the planning side of Ballet Core (configuration package)."""

from ballet.celery import app as celery_app

__all__ = ["celery_app"]
