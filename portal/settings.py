"""Settings, all from the environment (see README for the list)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_port_range,
    env_secret,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
# Without one, the embedded default keeps a generated key under var/ (portal.apps makes it).
SECRET_KEY = env_secret("SECRET_KEY", "")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Redoc served from here: /api/docs/ works without internet
    "channels",
    "portal",
    "portal.accounts",
    "clusters",
    "jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.apipaths.ApiPathMiddleware",
    "portal.metrics.ApiLatencyMiddleware",  # GET /metrics' API latency, from here on
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "portal.inputguard.InputGuardMiddleware",
    "portal.unavailable.ServiceUnavailableMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "portal.asgi.application"

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
                "portal.context_processors.scheduler_status",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_secret("DATABASE_URL", "") or f"sqlite:///{VAR_DIR / 'portal.sqlite3'}",
        conn_max_age=60,
        # A kept connection is checked before a request reuses it: one the server ended (a
        # restart, a failover, an idle timeout) is replaced instead of failing that request.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server, the worker and beat share the file without "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not memory, so that a server started by the browser tests sees the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Under ASGI each request runs its sync code in a thread of its own, so a connection kept
    # per thread (CONN_MAX_AGE) is never used again: every request connected anew, and the
    # job list took twice as long (bench/list.py). Django's own pool per process instead; it
    # checks a connection before handing it out (CONN_HEALTH_CHECKS).
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 1, "max_size": 10}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    # OpenPAI's rule (its user API's schema): a password of at least 6 characters.
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 6},
    },
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "jobs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor", BASE_DIR / "node_modules")]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# DATABASE_URL_FILE, REDIS_URL_FILE: the URL (with its password) read from a file, as compose
# passes them (a file made on the stack's first start, not a password written in the file).
REDIS_URL = env_secret("REDIS_URL", "redis://127.0.0.1:6379/0")

# redis-py 8 gives every connection a 5 s read timeout (it had none before). Right for the
# cache: its commands answer at once, and a Redis that hangs fails a request instead of
# holding it. Celery (kombu) sets no read timeout on its broker connections itself and polls
# with a 1 s BRPOP, so the worker and beat are not affected.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
}

CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Beat's full reconcile pass: the safety net. Submissions, stops, a local task's end and a
# Kubernetes pod's change wake the loop at once (jobs.wakeup; ``manage.py watchcluster``), so it
# can be rare.
RECONCILE_INTERVAL_SECONDS = env_float("RECONCILE_INTERVAL_SECONDS", 30.0, minimum=0.1)
# Pages say the scheduler is not running when no reconcile pass has ended for this long.
# GET /api/v2/alerts (jobs.alerts): a job waiting longer than this, a task killed for memory
# within the window, a node the capacity refresh (every 60 s) has not seen for this long.
ALERT_JOB_WAITING_SECONDS = env_float("ALERT_JOB_WAITING_SECONDS", 3600.0, minimum=1.0)
ALERT_WINDOW_SECONDS = env_float("ALERT_WINDOW_SECONDS", 24 * 3600.0, minimum=1.0)
ALERT_NODE_SILENT_SECONDS = env_float("ALERT_NODE_SILENT_SECONDS", 600.0, minimum=1.0)
# Each virtual cluster's use, sampled every minute by beat (clusters.usage): samples past a day
# are thinned to one an hour, and deleted after this many days.
VC_USAGE_RETENTION_DAYS = env_int("VC_USAGE_RETENTION_DAYS", 30, minimum=1)
# Each running task's CPU, memory, GPU utilisation and GPU memory are sampled this often
# (jobs.usage, a beat entry), charted on the job page and served by GET .../usage; samples
# are kept, thinned as they age, until USAGE_RETENTION_DAYS after their job ended.
USAGE_SAMPLE_SECONDS = env_float("USAGE_SAMPLE_SECONDS", 5.0, minimum=1.0)
USAGE_RETENTION_DAYS = env_float("USAGE_RETENTION_DAYS", 14.0, minimum=0.0)
# Like Slurm's PrivateData=jobs: when on, a user sees only their own jobs (lists, counts and
# details; others' are 404); when off, any signed-in user sees the status summary of the jobs
# they may list (config, logs, addresses and SSH stay the owner's and admins').
JOBS_PRIVATE = env_bool("JOBS_PRIVATE", False)
# OpenPAI's Python SDK (openpaisdk) reads the job list and a job's status without a token.
# When on, an anonymous GET of the job list or of a job answers the status summary any
# signed-in user sees of another user's job (jobs of the virtual clusters open to all; none
# with JOBS_PRIVATE); config, logs, SSH, addresses and every change still need a token.
API_ANONYMOUS_JOB_STATUS = env_bool("API_ANONYMOUS_JOB_STATUS", False)
SCHEDULER_LATE_SECONDS = env_float(
    "SCHEDULER_LATE_SECONDS", max(30.0, 3 * RECONCILE_INTERVAL_SECONDS), minimum=1.0
)
# How often an open page asks again whether the scheduler runs (portal.scheduler_status).
SCHEDULER_CHECK_SECONDS = env_float("SCHEDULER_CHECK_SECONDS", 10.0, minimum=0.5)
# GET /metrics (portal.metrics), for Prometheus: only clients in METRICS_ALLOWED_NETWORKS
# (CIDRs; the address daphne sees) and, when METRICS_TOKEN is set, that send it as a Bearer.
METRICS_TOKEN = env_secret("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])
for _network in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {_exc}") from None

# Every open WebSocket waits for its messages in a blocking BZPOPMIN of up to 5 s
# (channels_redis's brpop_timeout). Under redis-py 8's 5 s default read timeout that wait ends
# in "TimeoutError: Timeout reading from ..." and the socket closes every ~5 s
# (django/channels_redis#422, redis/redis-py#4091). No read timeout on the layer's connections,
# as before redis-py 8; TCP keepalive still finds a dead peer, and connecting
# keeps its 5 s timeout. A host given as a dict passes these to redis-py's ConnectionPool.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None, "socket_keepalive": True}],
            "prefix": env_str("CHANNEL_LAYER_PREFIX", "asgi"),
        },
    }
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
    # JSON refused with a 400 naming the field when it holds NUL or a lone surrogate, or nests
    # too deeply (portal.parsers).
    "DEFAULT_PARSER_CLASSES": [
        "portal.parsers.SafeJSONParser",
        "portal.parsers.SafeFormParser",
        "portal.parsers.SafeMultiPartParser",
    ],
    # Per-user limits; a caller over them gets 429 with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.throttling.UserRateThrottle",
        "portal.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("API_RATE_USER", "1200/minute"),
        "anon": env_str("API_RATE_ANON", "120/minute"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "OpenPAI-compatible REST API.",
    "VERSION": "0.1.0",
    "REDOC_DIST": "SIDECAR",
}

# Jobs and the cluster.
CLUSTER_BACKEND = env_str("CLUSTER_BACKEND", "local")
LOCAL_TASK_ROOT = Path(env_str("LOCAL_TASK_ROOT", str(VAR_DIR / "tasks")))
LOCAL_TASK_IP = env_str("LOCAL_TASK_IP", "127.0.0.1")
# LOCAL_TASK_PORTS=20000-20099: tasks' ports only from this range (a container publishes it to
# its host, docker-compose.yml); empty: any free port.
LOCAL_TASK_PORTS = env_port_range("LOCAL_TASK_PORTS")
# The local node's capacity for admission: 0 is this machine's (its CPUs, its memory). More
# CPUs than the machine has lets tasks that mostly wait share cores (each is still held to its
# own cpu by its cgroup); more memory than it has risks the kernel's OOM killer (issue 27).
LOCAL_CPUS = env_int("LOCAL_CPUS", 0, minimum=0)
LOCAL_MEMORY_MB = env_int("LOCAL_MEMORY_MB", 0, minimum=0)
# Inside a task (jobs.runtime): how long the barrier waits for peers' addresses, and how long
# jobEnvs.isDebug keeps a failed task's working directory (local) or pod (Kubernetes).
TASK_BARRIER_TIMEOUT_SECONDS = env_int("TASK_BARRIER_TIMEOUT_SECONDS", 600, minimum=1)
DEBUG_KEEP_HOURS = env_int("DEBUG_KEEP_HOURS", 24, minimum=1)
LOCAL_STOP_GRACE_SECONDS = env_float("LOCAL_STOP_GRACE_SECONDS", 10.0)
# What one task may write to each of its stdout and stderr logs on the local backend; past it
# the output is dropped (the task runs on) and the log ends with a line that says so.
LOCAL_TASK_LOG_MAX_BYTES = env_int("LOCAL_TASK_LOG_MAX_BYTES", 1024**3, minimum=1)
# How long the work dirs (and logs) of finished attempts stay on the local backend.
LOCAL_KEEP_FINISHED_HOURS = env_int("LOCAL_KEEP_FINISHED_HOURS", 7 * 24, minimum=0)
# Every local task runs in a bubblewrap sandbox (clusters/backends/local/sandbox.py). Off only
# for development, explicitly: LOCAL_SANDBOX=False runs every task as the portal's own user with
# the whole machine in view. As root, portal user N's tasks run as uid LOCAL_TASK_UID_BASE + N.
LOCAL_SANDBOX = env_bool("LOCAL_SANDBOX", True)
LOCAL_SANDBOX_BWRAP = env_str("LOCAL_SANDBOX_BWRAP", "bwrap")  # its name on PATH, or its path
LOCAL_TASK_UID_BASE = env_int("LOCAL_TASK_UID_BASE", 200_000, minimum=1000)
# The kernel's limits of every local task (cgroup v2 or v1 and a file system per working
# directory, as root): processes and threads, disk (working directory; /tmp holds as much), open
# files per process. Where one cannot be enforced, other users' tasks are refused unless
# LOCAL_REQUIRE_LIMITS=false; an admin's own tasks run. The start-up output says which hold.
LOCAL_TASK_PIDS_MAX = env_int("LOCAL_TASK_PIDS_MAX", 4096, minimum=16)
LOCAL_TASK_DISK_MB = env_int("LOCAL_TASK_DISK_MB", 10_240, minimum=0)
LOCAL_TASK_NOFILE = env_int("LOCAL_TASK_NOFILE", 65_536, minimum=64)
LOCAL_REQUIRE_LIMITS = env_bool("LOCAL_REQUIRE_LIMITS", True)
# The port the portal serves HTTP on (runportal's --port sets it for its processes; compose's
# 8000): local tasks reach it, as any browser would.
PORT = env_int("PORT", 8000, minimum=1)
# The network of local tasks (clusters/backends/local/firewall.py). "auto": as root with nft, an
# nftables table keeps them from every port of this host but their jobs', PORT,
# LOCAL_TASK_OPEN_PORTS and DNS; "on": no task starts where it cannot be set; "off": tasks reach
# all of this host's ports. LOCAL_FIREWALL_TABLE: the nftables table (family inet) it keeps.
LOCAL_FIREWALL = env_str("LOCAL_FIREWALL", "auto")
if LOCAL_FIREWALL not in ("auto", "on", "off"):
    raise ImproperlyConfigured(f"LOCAL_FIREWALL must be auto, on or off, not {LOCAL_FIREWALL!r}")
LOCAL_FIREWALL_TABLE = env_str("LOCAL_FIREWALL_TABLE", "portal_tasks")
LOCAL_TASK_OPEN_PORTS = env_list("LOCAL_TASK_OPEN_PORTS", [])  # e.g. 80,443 (a proxy's)
if not all(p.isdigit() and 0 < int(p) < 65536 for p in LOCAL_TASK_OPEN_PORTS):
    raise ImproperlyConfigured(f"LOCAL_TASK_OPEN_PORTS: not ports: {LOCAL_TASK_OPEN_PORTS!r}")
# Networks tasks may not open connections to (CIDRs), or "local": the networks this host is
# attached to (read at each firewall build), as in compose, where the database and Redis are
# other containers on the worker's network.
LOCAL_TASK_CLOSED_NETWORKS = env_list("LOCAL_TASK_CLOSED_NETWORKS", [])
for _network in LOCAL_TASK_CLOSED_NETWORKS:
    try:
        if _network != "local":
            ipaddress.ip_network(_network, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"LOCAL_TASK_CLOSED_NETWORKS: {_exc}") from None
# Where tasks could reach a Redis or database of the portal's that wants no password (no
# firewall: not root, no nft), the portal refuses to start (portal.E006) unless this is true.
LOCAL_ALLOW_OPEN_SERVICES = env_bool("LOCAL_ALLOW_OPEN_SERVICES", False)
# LOCAL_IMAGES=charliecloud: a local task with a dockerImage runs in it (ch-image pulls it into
# LOCAL_IMAGE_STORAGE, ch-run enters it in the sandbox); empty: the image is not used.
LOCAL_IMAGES = env_str("LOCAL_IMAGES", "")
if LOCAL_IMAGES not in ("", "charliecloud"):
    raise ImproperlyConfigured(f"LOCAL_IMAGES must be '' or 'charliecloud', not {LOCAL_IMAGES!r}")
LOCAL_IMAGE_STORAGE = Path(env_str("LOCAL_IMAGE_STORAGE", str(VAR_DIR / "images")))
# What no task sees, besides the portal's tree, var/, the task root and the portal user's home.
LOCAL_SANDBOX_HIDE = env_list("LOCAL_SANDBOX_HIDE", [])
# Directories every task of every user sees read-write (a lab's scratch space; tests).
LOCAL_SANDBOX_SHARED = env_list("LOCAL_SANDBOX_SHARED", [])
# The PATH tasks get: the system's, not the portal's (its virtualenv is hidden from them).
LOCAL_TASK_PATH = env_str(
    "LOCAL_TASK_PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)
TERMINAL_IDLE_SECONDS = env_int("TERMINAL_IDLE_SECONDS", 900, minimum=5)
JOB_MAX_BYTES = env_int("JOB_MAX_BYTES", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = JOB_MAX_BYTES + 64 * 1024
# Ports one task may ask for, all labels together (each is a socket held while it is placed).
JOB_MAX_PORTS_PER_TASK = env_int("JOB_MAX_PORTS_PER_TASK", 100, minimum=1)
API_TOKEN_DEFAULT_SECONDS = env_int("API_TOKEN_DEFAULT_SECONDS", 7 * 24 * 3600, minimum=60)
# Application tokens are for long-running scripts; they can be revoked at any time.
API_APPLICATION_TOKEN_SECONDS = env_int("API_APPLICATION_TOKEN_SECONDS", 10 * 365 * 24 * 3600)
# A login with an unknown name answers OpenPAI's 400 NoUserError ("User x is not found."), as
# its SDKs expect; True answers it as a wrong password, so the login tells no one which names
# exist (either way the login is rate-limited per address, API_RATE_ANON).
API_LOGIN_HIDES_UNKNOWN_USERS = env_bool("API_LOGIN_HIDES_UNKNOWN_USERS", False)

# Accounts kept by the lab's directory or single sign-on (portal.accounts.directory): which of
# its groups the portal uses, as which portal group (ext=portal,...), and which make admins.
DIRECTORY_GROUPS: dict[str, str] = {}
for _pair in env_list("DIRECTORY_GROUPS", []):
    _external, _sep, _portal = _pair.partition("=")
    if not _sep or not _external.strip() or not _portal.strip():
        raise ImproperlyConfigured(f"DIRECTORY_GROUPS: {_pair!r} is not directory=portal")
    DIRECTORY_GROUPS[_external.strip()] = _portal.strip()
DIRECTORY_ADMIN_GROUPS = env_list("DIRECTORY_ADMIN_GROUPS", [])
# How long a directory's word that an account exists holds before a token or session of it is
# trusted again only after asking the directory anew.
DIRECTORY_RECHECK_SECONDS = env_float("DIRECTORY_RECHECK_SECONDS", 300.0, minimum=0.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

# The Kubernetes backend (CLUSTER_BACKEND=kubernetes; clusters/backends/kubernetes/).
K8S_IN_CLUSTER = env_bool("K8S_IN_CLUSTER", False)  # else a kubeconfig
K8S_KUBECONFIG = env_str("K8S_KUBECONFIG", "")  # "" = $KUBECONFIG or ~/.kube/config
K8S_CONTEXT = env_str("K8S_CONTEXT", "")  # "" = the kubeconfig's current context
K8S_NAMESPACE = env_str("K8S_NAMESPACE", "default")
K8S_GPU_RESOURCE = env_str("K8S_GPU_RESOURCE", "nvidia.com/gpu")
K8S_GPU_TYPE_LABEL = env_str("K8S_GPU_TYPE_LABEL", "gpu-portal/gpu-type")
K8S_IMAGE_PULL_POLICY = env_str("K8S_IMAGE_PULL_POLICY", "IfNotPresent")
K8S_NODE_SELECTOR = env_list("K8S_NODE_SELECTOR", [])  # key=value,... for every job's pods
K8S_DEFAULT_IMAGE = env_str("K8S_DEFAULT_IMAGE", "python:3.11-slim")
K8S_PORT_BASE = env_int("K8S_PORT_BASE", 20000, minimum=1024)
K8S_STOP_GRACE_SECONDS = env_int("K8S_STOP_GRACE_SECONDS", 10, minimum=0)
K8S_API_ATTEMPTS = env_int("K8S_API_ATTEMPTS", 6, minimum=1)
K8S_API_BACKOFF_SECONDS = env_float("K8S_API_BACKOFF_SECONDS", 0.2)
K8S_API_BACKOFF_CAP_SECONDS = env_float("K8S_API_BACKOFF_CAP_SECONDS", 5.0)
# Pods (and logs) of finished attempts are deleted this long after the attempt ended.
K8S_KEEP_FINISHED_HOURS = env_int("K8S_KEEP_FINISHED_HOURS", 24, minimum=0)
# local-dir storages become hostPath volumes only when an admin allows it.
K8S_ALLOW_HOST_PATH_STORAGE = env_bool("K8S_ALLOW_HOST_PATH_STORAGE", False)
# An image pull that keeps failing (ErrImagePull, ImagePullBackOff) fails its task after this.
K8S_IMAGE_PULL_TIMEOUT_SECONDS = env_int("K8S_IMAGE_PULL_TIMEOUT_SECONDS", 300, minimum=0)
