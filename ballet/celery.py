"""The Celery application: eager in the embedded mode, Redis-backed in production."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")

app = Celery("ballet")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
