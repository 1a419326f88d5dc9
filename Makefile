.PHONY: demo test lint typecheck check

# Set everything up and run the main job on embedded defaults (see README).
demo:
	scripts/demo

# The whole test suite on PostgreSQL (see README).
test:
	scripts/test

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck:
	.venv/bin/mypy .

check: lint typecheck
	.venv/bin/python manage.py makemigrations --check --dry-run
