.PHONY: demo test lint typecheck check real-engine

# Set everything up and run the main job on embedded defaults (see README).
demo:
	scripts/demo

# The whole test suite on PostgreSQL (see README).
test:
	scripts/test

# Build llama-server from the pinned llama-cpp-python sdist (≈6 min on 2 cores, cached outside the
# repository and reused while the version stamp matches) and write the test models to var/models.
real-engine:
	scripts/bootstrap
	.venv/bin/specportal real-engine build
	.venv/bin/specportal real-engine models --out var/models

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck:
	.venv/bin/mypy .

check: lint typecheck
	.venv/bin/python manage.py makemigrations --check --dry-run
