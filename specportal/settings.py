"""Django settings, read from the environment.

Development defaults are safe and need nothing running: SQLite (WAL) in ``var/`` and an embedded
Celery broker on the filesystem. Production (``SPECPORTAL_ENV=production``) refuses to start
without ``DJANGO_SECRET_KEY`` or with ``DJANGO_DEBUG`` on.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from analysis.verdict_schema import json_schema as verdict_json_schema
from specportal import embedded_broker
from specportal.agent import DEFAULT_VISIBILITY_TIMEOUT_SECONDS
from specportal.protocol import limits

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

SPECPORTAL_ENV = env.str("SPECPORTAL_ENV", default="development")
if SPECPORTAL_ENV not in {"development", "production"}:
    raise ImproperlyConfigured("SPECPORTAL_ENV must be 'development' or 'production'")
PRODUCTION = SPECPORTAL_ENV == "production"

# Where the embedded defaults keep their files (SQLite database, embedded broker, results).
DATA_DIR = Path(env.str("SPECPORTAL_DATA_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DJANGO_DEBUG", default=not PRODUCTION)
if PRODUCTION:
    if DEBUG:
        raise ImproperlyConfigured("DJANGO_DEBUG must be off when SPECPORTAL_ENV=production")
    SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
    if not SECRET_KEY:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is required when SPECPORTAL_ENV=production")
else:
    # A visible placeholder, never used in production (see the check above).
    SECRET_KEY = env.str(
        "DJANGO_SECRET_KEY", default="!!! development only: set DJANGO_SECRET_KEY !!!"
    )

ALLOWED_HOSTS = env.list(
    "DJANGO_ALLOWED_HOSTS", default=[] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]"]
)
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles, so its runserver (static files served the same, TCP_NODELAY on) wins.
    "specportal.devserver",
    "django.contrib.staticfiles",
    # Failed logins counted per account and per address (accounts.backends).
    "axes",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # htmx, served from the package (no CDN): live updates of running experiments.
    "django_htmx",
    "accounts",
    "configurations",
    "hosts",
    "experiments",
    "runs",
    "audit",
    "notifications",
    # The shared API plumbing has one table: the Idempotency-Key answers.
    "specportal.api",
    "verdicts",
    "approvals",
    # Last and depended on by nothing: the demo command imports every app.
    "demo",
]

MIDDLEWARE = [
    # First: a NUL in the URL is refused before anything queries with it, and every error answer
    # under /api/ (Django's own HTML ones from the middlewares below included) is in the one shape.
    "specportal.api.errors.ApiErrorShapeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The request id and source address of audit events (audit.record reads them).
    "audit.context.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out login into accounts.views.login_locked_out.
    "axes.middleware.AxesMiddleware",
]
if PRODUCTION:
    # gunicorn serves no static files: WhiteNoise serves the collected ones (the admin's, the
    # API docs' sidecar), so the docs pages work offline in the docker-compose stack too.
    MIDDLEWARE.insert(2, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "specportal.urls"
WSGI_APPLICATION = "specportal.wsgi.application"
ASGI_APPLICATION = "specportal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "specportal.context_processors.user_roles",
            ],
        },
    },
]

# --- database ---------------------------------------------------------------------------------
# PostgreSQL when DATABASE_URL is set; otherwise SQLite in WAL mode, so the demo's web server,
# worker and agents can read while one of them writes.
SQLITE_PATH = DATA_DIR / "specportal.sqlite3"
if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=0))
else:
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,  # seconds of busy wait before "database is locked"
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# --- login throttling (django-axes; accounts.backends) -----------------------------------------
AUTHENTICATION_BACKENDS = [
    # First: refuses any login for a locked-out account or address before a password is checked.
    "accounts.backends.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# After this many failed logins for an account, or from an address, every login for it is refused
# (the right password too) for the lockout; a success resets the count, and a failure during the
# lockout starts it again.
AXES_FAILURE_LIMIT = env.int("SPECPORTAL_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("SPECPORTAL_LOGIN_LOCKOUT_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.views.login_locked_out"
# Successful logins are not logged by axes (the audit trail is the project's record).
AXES_DISABLE_ACCESS_LOG = True
# No start-up banner on every manage.py command (lockouts are still logged as warnings).
AXES_VERBOSE = False
# The address is REMOTE_ADDR unless SPECPORTAL_TRUSTED_PROXIES proxies in front set
# X-Forwarded-For (which a client could otherwise write to get a fresh address per attempt).
SPECPORTAL_TRUSTED_PROXIES = env.int("SPECPORTAL_TRUSTED_PROXIES", default=0)
AXES_IPWARE_META_PRECEDENCE_ORDER: tuple[str, ...] = ("REMOTE_ADDR",)
if SPECPORTAL_TRUSTED_PROXIES:
    AXES_IPWARE_PROXY_COUNT = SPECPORTAL_TRUSTED_PROXIES
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
# The site's own CSS and scripts (Plotly's script is served from the installed package by
# ``specportal.views.plotly_js``).
STATICFILES_DIRS = [BASE_DIR / "specportal" / "static"]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# --- HTTPS (production) -------------------------------------------------------------------------
# Production is served over HTTPS only: plain HTTP is redirected, browsers are told to use HTTPS
# for a year (HSTS), and the session and CSRF cookies are never sent in clear. Most deployments
# terminate TLS in a proxy in front of gunicorn: then SPECPORTAL_TLS_PROXY=true makes Django trust
# the proxy's X-Forwarded-Proto (without it every request looks like plain HTTP and the redirect
# never ends). Only set it when the proxy overwrites that header: a client could otherwise claim
# HTTPS. ``manage.py check --deploy`` is clean with these defaults (tests/specportal/test_settings.py).
SPECPORTAL_TLS_PROXY = env.bool("SPECPORTAL_TLS_PROXY", default=False)
if SPECPORTAL_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
if PRODUCTION:
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    # The header only allows a submission to the browsers' preload lists; nothing is submitted.
    SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)
    SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=True)
    SECURE_CONTENT_TYPE_NOSNIFF = True

# --- REST API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token authentication comes first: its WWW-Authenticate header is what turns an
    # unauthenticated call into 401 rather than DRF's default 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # The client address of throttles is REMOTE_ADDR unless this many proxies in front append
    # to X-Forwarded-For (DRF would otherwise trust the whole header, which a client writes).
    "NUM_PROXIES": SPECPORTAL_TRUSTED_PROXIES,
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.IsViewer"],
    # drf-spectacular's, plus every 4xx in the one error shape (specportal.api.schema).
    "DEFAULT_SCHEMA_CLASS": "specportal.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "specportal.api.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # The API reads JSON only (a form post is a 415), so its schema offers JSON bodies only.
    # Uploads (results, imports) read their raw stream; imports' multipart is Django's own.
    # JSON with limits (size, depth, finite numbers, no NUL or lone surrogate, no repeated key),
    # refused with the path of what is wrong before any view sees it.
    "DEFAULT_PARSER_CLASSES": ["specportal.api.parsers.StrictJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

# --- API tokens and throttling -----------------------------------------------------------------
# A user's API token lives at most this many days (0: no maximum); a token created without an
# expiry gets the maximum (accounts.services.api_token_create).
SPECPORTAL_API_TOKEN_MAX_DAYS = env.int("SPECPORTAL_API_TOKEN_MAX_DAYS", default=365)
# Wrong, expired or revoked tokens (users' and hosts' counted apart) from one address: after this
# many within the window, every token from that address gets 429 until the window frees
# (accounts.throttling). 0 turns the limit off.
SPECPORTAL_TOKEN_FAILURE_LIMIT = env.int("SPECPORTAL_TOKEN_FAILURE_LIMIT", default=10)
SPECPORTAL_TOKEN_FAILURE_WINDOW_SECONDS = env.int(
    "SPECPORTAL_TOKEN_FAILURE_WINDOW_SECONDS", default=300
)
# Throttle counts live in the cache: process memory by default; with several web processes give
# them one Redis (SPECPORTAL_CACHE_URL=redis://host:6379/2) so a limit is a limit for all of them.
CACHES = {"default": env.cache_url("SPECPORTAL_CACHE_URL", default="locmemcache://")}

# The largest JSON body an API call may send (result uploads and imported files are read as
# streams, not through this): a 413 in the error shape above it.
SPECPORTAL_API_MAX_JSON_BYTES = env.int("SPECPORTAL_API_MAX_JSON_BYTES", default=2_621_440)

# Django's DEBUG page (development only) is shown to loopback clients alone, with every URL's
# password masked; anyone else gets a plain "Server error" page (specportal.api.debug).
DEFAULT_EXCEPTION_REPORTER = "specportal.api.debug.LoopbackOnlyExceptionReporter"
DEFAULT_EXCEPTION_REPORTER_FILTER = "specportal.api.debug.CredentialsMaskingFilter"

SPECTACULAR_SETTINGS = {
    "TITLE": "SpecPortal API",
    "DESCRIPTION": "Frozen serving configurations, experiments, runs and verdicts.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request bodies get components of their own ("…Request"): they can say
    # additionalProperties: false (unknown fields are refused) without binding the answers.
    "COMPONENT_SPLIT_REQUEST": True,
    # The schema and docs pages need a login or token like every other endpoint.
    "SERVE_PERMISSIONS": ["accounts.permissions.IsViewer"],
    # Self-hosted Swagger UI and Redoc so the docs pages work without network access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two models have a "mode" choice set (hosts, experiments): name each.
    "ENUM_NAME_OVERRIDES": {
        "ExperimentModeEnum": "experiments.models.Experiment.Mode",
        "HostModeEnum": "hosts.models.GpuHost.Mode",
        "ApiTokenScopeEnum": "accounts.models.ApiToken.Scope",
        "ApiTokenStateEnum": "accounts.models.TOKEN_STATES",
        # The verdict states keep the name they had before tokens had a "state" too.
        "StateEnum": ["KEEP", "DROP", "INCONCLUSIVE"],
    },
    # The verdict document (analysis/VERDICT.md) is typed once, in analysis.verdict_schema.
    "APPEND_COMPONENTS": {"schemas": verdict_json_schema()},
}

# --- experiment caps -----------------------------------------------------------------------------
# An experiment past these is refused at creation, with the setting's name in the error; the API
# schema states them. The first two may only be lowered below the protocol's bounds
# (specportal.protocol.limits), which agents check too.
SPECPORTAL_MAX_REPETITIONS = env.int("SPECPORTAL_MAX_REPETITIONS", default=limits.MAX_REPETITIONS)
SPECPORTAL_MAX_REQUESTS_PER_LOAD = env.int(
    "SPECPORTAL_MAX_REQUESTS_PER_LOAD", default=limits.MAX_REQUESTS_PER_RUN
)
# Runs in one plan (workloads × loads × arms × repetitions): 10,000 runs of a few minutes each
# are already weeks of one GPU host.
SPECPORTAL_MAX_RUNS_PER_PLAN = env.int("SPECPORTAL_MAX_RUNS_PER_PLAN", default=10_000)
for _name, _value, _bound in (
    ("SPECPORTAL_MAX_REPETITIONS", SPECPORTAL_MAX_REPETITIONS, limits.MAX_REPETITIONS),
    (
        "SPECPORTAL_MAX_REQUESTS_PER_LOAD",
        SPECPORTAL_MAX_REQUESTS_PER_LOAD,
        limits.MAX_REQUESTS_PER_RUN,
    ),
    ("SPECPORTAL_MAX_RUNS_PER_PLAN", SPECPORTAL_MAX_RUNS_PER_PLAN, limits.INT4_MAX),
):
    if not 1 <= _value <= _bound:
        raise ImproperlyConfigured(f"{_name} must be from 1 to {_bound} (it is {_value})")

# --- Celery -----------------------------------------------------------------------------------
# Redis when CELERY_BROKER_URL is set; otherwise kombu's filesystem transport in DATA_DIR, a real
# broker that several local processes can share without any service running.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
# Redis redelivers a message not acknowledged within this many seconds; runs are acknowledged when
# they end, so it must exceed the longest run (experiments whose longest run would not fit are
# refused at start). Agents take the same variable.
CELERY_VISIBILITY_TIMEOUT = env.int(
    "CELERY_VISIBILITY_TIMEOUT", default=DEFAULT_VISIBILITY_TIMEOUT_SECONDS
)
EMBEDDED_BROKER_DIR = DATA_DIR / "broker"
if not CELERY_BROKER_URL:
    CELERY_BROKER_URL = embedded_broker.URL
    CELERY_BROKER_TRANSPORT = embedded_broker.TRANSPORT
    CELERY_BROKER_TRANSPORT_OPTIONS = embedded_broker.transport_options(EMBEDDED_BROKER_DIR)
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT}
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "portal"
# --- run state (DESIGN §5) ---------------------------------------------------------------------
# The production defaults; tests shorten them through the environment (the portal worker, beat
# and the web process must agree, so they are settings, not constants).
# A claim holds this long without a heartbeat; agents heartbeat every 15 s, so a lease survives a
# few missed beats but a killed agent's run is re-queued within a couple of minutes.
SPECPORTAL_LEASE_SECONDS = env.int("SPECPORTAL_LEASE_SECONDS", default=90)
# A QUEUED run whose message has not been claimed after this long is published again (a broker
# restart may have lost it; a duplicate is harmless because claims are conditional).
SPECPORTAL_STALE_QUEUED_SECONDS = env.int("SPECPORTAL_STALE_QUEUED_SECONDS", default=120)
# A stored upload not ingested after this long (its message was lost, or the worker failed on it
# for a passing reason such as a lost database connection) is ingested by the beat's fallback.
SPECPORTAL_PENDING_UPLOAD_SECONDS = env.int("SPECPORTAL_PENDING_UPLOAD_SECONDS", default=120)
# An upload whose ingestion keeps failing for a passing reason is tried at every beat; this long
# after it was received, its run is failed instead (never left running for ever).
SPECPORTAL_PENDING_UPLOAD_GIVE_UP_SECONDS = env.int(
    "SPECPORTAL_PENDING_UPLOAD_GIVE_UP_SECONDS", default=6 * 3600
)
# The largest result upload an agent may PUT, as sent (gzip'd): 512 MiB holds ~500,000 requests
# of ~100 chunks. Larger is a 413 before it is read. Its JSON once decompressed is capped too
# (a gzip bomb costs no more than this to refuse). Uploads are streamed to storage and checked in
# bounded memory, so neither cap is the web process's memory.
SPECPORTAL_RESULT_UPLOAD_MAX_BYTES = env.int(
    "SPECPORTAL_RESULT_UPLOAD_MAX_BYTES", default=512 * 1024**2
)
SPECPORTAL_RESULT_UPLOAD_MAX_JSON_BYTES = env.int(
    "SPECPORTAL_RESULT_UPLOAD_MAX_JSON_BYTES", default=8 * 1024**3
)

# Every periodic task, in one place (run with ``celery -A specportal.celery_app beat``); each
# interval can be set from the environment (SPECPORTAL_BEAT_<NAME>_SECONDS).
CELERY_BEAT_SCHEDULE = {
    # A QUEUED run whose message was lost (broker restart) is published again.
    "runs-republish-stale": {
        "task": "runs.runs_republish_stale_task",
        "schedule": env.float("SPECPORTAL_BEAT_REPUBLISH_SECONDS", default=30.0),
    },
    # Runs whose agent stopped renewing the lease: re-queued once, then failed.
    "runs-reap-expired-leases": {
        "task": "runs.runs_reap_expired_leases_task",
        "schedule": env.float("SPECPORTAL_BEAT_REAP_SECONDS", default=15.0),
    },
    # Uploads whose ingestion message was lost are ingested anyway.
    "uploads-ingest-pending": {
        "task": "runs.uploads_ingest_pending_task",
        "schedule": env.float("SPECPORTAL_BEAT_INGEST_PENDING_SECONDS", default=60.0),
    },
    # Approved change requests not applied in time expire; evidence superseded by newer verdicts
    # is checked again.
    "approvals-expire": {
        "task": "approvals.change_requests_expire_task",
        "schedule": env.float("SPECPORTAL_BEAT_APPROVALS_EXPIRE_SECONDS", default=300.0),
    },
    "approvals-recheck": {
        "task": "approvals.change_requests_recheck_task",
        "schedule": env.float("SPECPORTAL_BEAT_APPROVALS_RECHECK_SECONDS", default=300.0),
    },
    # Hosts whose agent went silent are marked unreachable (and refuse new starts).
    "hosts-check-health": {
        "task": "hosts.hosts_check_health_task",
        "schedule": env.float("SPECPORTAL_BEAT_HOST_HEALTH_SECONDS", default=30.0),
    },
    # Webhook deliveries whose (re)try message was lost are sent when overdue.
    "notifications-send-due": {
        "task": "notifications.deliveries_send_due_task",
        "schedule": env.float("SPECPORTAL_BEAT_WEBHOOKS_SECONDS", default=30.0),
    },
}

# Notifications (notifications/): webhooks go only to public addresses unless this is on (a lab,
# the tests); attempts per delivery, the first retry's wait (doubling after each failure, capped
# at an hour) and each POST's timeout.
SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE = env.bool("SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE", default=False)
SPECPORTAL_WEBHOOK_MAX_ATTEMPTS = env.int("SPECPORTAL_WEBHOOK_MAX_ATTEMPTS", default=6)
SPECPORTAL_WEBHOOK_BACKOFF_SECONDS = env.float("SPECPORTAL_WEBHOOK_BACKOFF_SECONDS", default=30.0)
SPECPORTAL_WEBHOOK_TIMEOUT_SECONDS = env.float("SPECPORTAL_WEBHOOK_TIMEOUT_SECONDS", default=10.0)
# E-mail through Django's backend: the console backend unless one is configured.
EMAIL_BACKEND = env.str(
    "DJANGO_EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = env.str("DJANGO_DEFAULT_FROM_EMAIL", default="specportal@localhost")

# The audit chain's head is logged with every event (``audit.chain``) to a file of its own, apart
# from the database, so ``manage.py audit verify --log FILE`` finds deleted newest events.
AUDIT_HEAD_LOG = Path(
    env.str("SPECPORTAL_AUDIT_HEAD_LOG", default=str(DATA_DIR / "audit-head.log"))
)
AUDIT_HEAD_LOG.parent.mkdir(parents=True, exist_ok=True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # URL passwords (DATABASE_URL, CELERY_BROKER_URL, a host's endpoint) never reach a log.
    "filters": {"mask_credentials": {"()": "specportal.api.secrets.MaskCredentialsFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["mask_credentials"]},
        "audit_head": {
            "class": "logging.FileHandler",
            "filename": str(AUDIT_HEAD_LOG),
            "delay": True,
            "formatter": "timestamped",
            "filters": ["mask_credentials"],
        },
    },
    "formatters": {"timestamped": {"format": "%(asctime)s %(message)s"}},
    "loggers": {
        "audit.chain": {"handlers": ["audit_head"], "level": "INFO", "propagate": False},
        # Django's own logging would keep its unmasked console handler for these (a 500's
        # traceback, printed with DEBUG on): they reach the root's masked one instead.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
    },
    "root": {"handlers": ["console"], "level": env.str("SPECPORTAL_LOG_LEVEL", default="INFO")},
}

# Verdict recomputation: published this many seconds after a run lands, so runs landing close
# together share one computation; a task overtaken by a newer request skips unless the stored
# verdict is older than the staleness limit (the pages stay live while an experiment runs).
SPECPORTAL_VERDICT_DELAY_SECONDS = env.float("SPECPORTAL_VERDICT_DELAY_SECONDS", default=5.0)
SPECPORTAL_VERDICT_STALE_SECONDS = env.float("SPECPORTAL_VERDICT_STALE_SECONDS", default=20.0)

# Where the approvals' evidence rules read an experiment's current verdict (approvals.verdict_source).
SPECPORTAL_VERDICT_SOURCE = env.str(
    "SPECPORTAL_VERDICT_SOURCE", default="approvals.verdict_source.from_verdicts_app"
)

# --- tests ------------------------------------------------------------------------------------
# The suite runs on PostgreSQL; SQLite-specific behaviour (the demo's triggers) is tested through
# this second alias inside the same suite.
if env.bool("SPECPORTAL_TEST_SQLITE_ALIAS", default=False):
    DATABASES["sqlite"] = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "test-sqlite-alias.sqlite3",
        "TEST": {"NAME": str(DATA_DIR / "test-sqlite-alias.sqlite3")},
    }
