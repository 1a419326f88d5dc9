"""The portal's Celery app (workers: ``celery -A specportal.celery_app worker``).

Kept out of ``specportal/__init__.py`` on purpose: importing ``specportal`` must not import Django
or Celery. GPU-host agents use their own, Django-free app in ``specportal.agent``.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "specportal.settings")

app = Celery("specportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
