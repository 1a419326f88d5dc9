"""Project-wide API plumbing every app shares (Django and DRF; not imported by ``specportal``).

- :mod:`specportal.api.errors`: the one error shape (``ApplicationError``, ``error_body``, the DRF
  exception handler, the JSON 404 for unknown ``/api/`` URLs);
- :mod:`specportal.api.input`: input strictness (unknown fields and filters refused with a
  suggestion, strict strings, labels);
- :mod:`specportal.api.docs`: the OpenAPI schema, Swagger UI and Redoc views.
"""
