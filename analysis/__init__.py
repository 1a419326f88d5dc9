"""Django-free numerics: metric definitions, statistics, verdicts, speculation model, figures."""
