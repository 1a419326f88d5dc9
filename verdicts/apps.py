from django.apps import AppConfig


class VerdictsConfig(AppConfig):
    name = "verdicts"
    verbose_name = "Verdicts"

    def ready(self) -> None:
        # A run that ends or is re-queued changes what the experiment's verdict stands on.
        from runs import signals
        from verdicts import dispatch

        signals.run_ended.connect(dispatch.on_run_changed, dispatch_uid="verdicts-run-ended")
        signals.run_requeued.connect(dispatch.on_run_changed, dispatch_uid="verdicts-run-requeued")
