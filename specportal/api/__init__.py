"""Project-wide API plumbing every app shares (Django and DRF; not imported by ``specportal``).

- :mod:`specportal.api.errors`: the one error shape (``ApplicationError``, ``error_body``, the DRF
  exception handler and its JSON 500, the JSON 404 for unknown ``/api/`` URLs, the middleware that
  reshapes every other error under ``/api/``);
- :mod:`specportal.api.debug`: Django's DEBUG page for loopback clients only, secrets masked;
- :mod:`specportal.api.parsers`: JSON read with limits (DRF's default parser);
- :mod:`specportal.api.secrets`: URL passwords masked (pages, logs);
- :mod:`specportal.api.input`: input strictness (unknown fields and filters refused with a
  suggestion, strict strings, labels);
- :mod:`specportal.api.docs`: the OpenAPI schema, Swagger UI and Redoc views.
"""
