# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY specportal specportal
COPY accounts accounts
COPY configurations configurations
COPY hosts hosts
COPY experiments experiments
COPY runs runs
COPY audit audit
COPY notifications notifications
COPY verdicts verdicts
COPY approvals approvals
COPY demo demo
COPY analysis analysis
COPY templates templates
COPY examples examples
COPY manage.py ./
RUN pip install --no-cache-dir '.[portal]' gunicorn
RUN SPECPORTAL_ENV=development python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "specportal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
