from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The shared API plumbing; an app only for its one table, the idempotency keys."""

    name = "specportal.api"
    label = "api"
    verbose_name = "API plumbing"
