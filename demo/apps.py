from django.apps import AppConfig


class DemoConfig(AppConfig):
    """Only the ``demo`` command: it imports every app, so no app may import it."""

    name = "demo"
    verbose_name = "Demo"
