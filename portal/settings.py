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
    env_pairs,
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
    "accounts",
    "clusters",
    "jobs",
    "notify",  # alerts by e-mail and webhook; jobs, clusters and portal never import it
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
    # checks a connection before handing it out (CONN_HEALTH_CHECKS). While the database
    # refuses connections, a request waits 10 s for one (psycopg_pool's default: 30 s), then
    # answers 503 (``portal.unavailable``).
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": 10,
        "timeout": 10,
    }
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
# (CIDRs; the connection's address, never an X-Forwarded-For) and, when METRICS_TOKEN is set,
# that send it as a Bearer.
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
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apikit.errors.exception_handler",
    # JSON refused with a 400 naming the field when it holds NUL or a lone surrogate, or nests
    # too deeply (apikit.parsers).
    "DEFAULT_PARSER_CLASSES": [
        "apikit.parsers.SafeJSONParser",
        "apikit.parsers.SafeFormParser",
        "apikit.parsers.SafeMultiPartParser",
    ],
    # Per-user limits; a caller over them gets 429 with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": [
        "apikit.throttling.UserRateThrottle",
        "apikit.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("API_RATE_USER", "1200/minute"),
        "anon": env_str("API_RATE_ANON", "120/minute"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
# Waits for a job's end at once per web server process (GET /api/v2/jobs/<job>?wait=): each
# holds a thread; past it, a wait answers at once (jobs.api.waiting).
API_WAITS_MAX = env_int("API_WAITS_MAX", 256, minimum=0)
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
# Every local task runs in a bubblewrap sandbox (backends/local/sandbox.py). Off only
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
# The network of local tasks (backends/local/firewall.py). "auto": as root with nft, an
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

# Accounts kept by the lab's directory or single sign-on (accounts.directory): which of
# its groups the portal uses, as which portal group (ext=portal,...), and which make admins.
DIRECTORY_GROUPS = env_pairs("DIRECTORY_GROUPS")
if not all(DIRECTORY_GROUPS.values()):
    raise ImproperlyConfigured(f"DIRECTORY_GROUPS: a group maps to no name: {DIRECTORY_GROUPS}")
DIRECTORY_ADMIN_GROUPS = env_list("DIRECTORY_ADMIN_GROUPS", [])
# How long a directory's word that an account exists holds before a token or session of it is
# trusted again only after asking the directory anew.
DIRECTORY_RECHECK_SECONDS = env_float("DIRECTORY_RECHECK_SECONDS", 300.0, minimum=0.0)

# Sign-in with the lab's LDAP directory (accounts.ldap, README "LDAP sign-in"): on when
# LDAP_SERVER_URI is set (ldap://host, ldaps://host:636). The portal binds as LDAP_BIND_DN
# (empty: anonymously) to find the entry LDAP_USER_FILTER names under LDAP_USER_SEARCH_BASE
# ({username}: the name typed, escaped; a filter that leaves out disabled accounts makes them
# count as removed), then checks the password by binding as that entry.
LDAP_SERVER_URI = env_str("LDAP_SERVER_URI", "")
LDAP_BIND_DN = env_str("LDAP_BIND_DN", "")
LDAP_BIND_PASSWORD = env_secret("LDAP_BIND_PASSWORD", "")  # or LDAP_BIND_PASSWORD_FILE
LDAP_USER_SEARCH_BASE = env_str("LDAP_USER_SEARCH_BASE", "")
LDAP_USER_FILTER = env_str("LDAP_USER_FILTER", "(uid={username})")
if LDAP_SERVER_URI and not LDAP_USER_SEARCH_BASE:
    raise ImproperlyConfigured("LDAP_USER_SEARCH_BASE: where the users are (ou=people,dc=...)")
if LDAP_SERVER_URI and "{username}" not in LDAP_USER_FILTER:
    raise ImproperlyConfigured("LDAP_USER_FILTER must hold {username}, the name typed")
# The entry's attributes that give the portal username (the one LDAP_USER_FILTER matches: a
# user is looked up again by it), e-mail and names (empty: not read).
LDAP_USERNAME_ATTRIBUTE = env_str("LDAP_USERNAME_ATTRIBUTE", "uid")
LDAP_EMAIL_ATTRIBUTE = env_str("LDAP_EMAIL_ATTRIBUTE", "mail")
LDAP_FIRST_NAME_ATTRIBUTE = env_str("LDAP_FIRST_NAME_ATTRIBUTE", "givenName")
LDAP_LAST_NAME_ATTRIBUTE = env_str("LDAP_LAST_NAME_ATTRIBUTE", "sn")
# The user's groups (by their cn; DIRECTORY_GROUPS maps them): groupOfNames (member: the
# user's DN), groupOfUniqueNames (uniqueMember), posixGroup (memberUid: the username), searched
# under LDAP_GROUP_SEARCH_BASE (empty: no groups are read); or memberOf, the user's own
# attribute (Active Directory, OpenLDAP's memberof overlay).
LDAP_GROUP_SEARCH_BASE = env_str("LDAP_GROUP_SEARCH_BASE", "")
LDAP_GROUP_TYPE = env_str("LDAP_GROUP_TYPE", "groupOfNames")
if LDAP_GROUP_TYPE not in ("groupOfNames", "groupOfUniqueNames", "posixGroup", "memberOf"):
    raise ImproperlyConfigured(
        "LDAP_GROUP_TYPE must be groupOfNames, groupOfUniqueNames, posixGroup or memberOf,"
        f" not {LDAP_GROUP_TYPE!r}"
    )
# LDAP_START_TLS: StartTLS on an ldap:// connection; the server's certificate is checked
# against LDAP_CA_FILE (a PEM file; empty: the system's CAs), for ldaps:// too.
LDAP_START_TLS = env_bool("LDAP_START_TLS", False)
LDAP_CA_FILE = env_str("LDAP_CA_FILE", "")
# Connect and answer timeout of each request to the directory (whole seconds: ldap3's).
LDAP_TIMEOUT_SECONDS = env_int("LDAP_TIMEOUT_SECONDS", 5, minimum=1)
# LOCAL_ACCOUNTS=off: accounts kept by the portal (a password it stores: the first admin, the
# Users page's) can no longer sign in, nor use a token or session made before; only the
# directory's (or single sign-on's) can. Make sure an admin of the directory's
# DIRECTORY_ADMIN_GROUPS can sign in first: with it off, no local admin is left.
_local_accounts = env_str("LOCAL_ACCOUNTS", "on").strip().lower()
if _local_accounts not in ("on", "off", "true", "false", "1", "0"):
    raise ImproperlyConfigured(f"LOCAL_ACCOUNTS must be on or off, not {_local_accounts!r}")
LOCAL_ACCOUNTS = _local_accounts in ("on", "true", "1")
# Single sign-on with OpenID Connect (accounts.oidc, README "Single sign-on"): on when
# OIDC_ISSUER and OIDC_CLIENT_ID are set. The login page then offers "Sign in with
# OIDC_PROVIDER_NAME" beside the password form. The provider's endpoints come from its
# discovery document (OIDC_ISSUER/.well-known/openid-configuration), read at the first sign-in
# and kept an hour; a provider that does not answer it is named on the login page. Register
# <portal URL>/oidc/callback/ as the client's redirect URI and <portal URL>/login/ as its
# post-logout redirect URI.
OIDC_ISSUER = env_str("OIDC_ISSUER", "").rstrip("/")
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET", "")  # or OIDC_CLIENT_SECRET_FILE
OIDC_ENABLED = bool(OIDC_ISSUER and OIDC_RP_CLIENT_ID)
if OIDC_ENABLED and not OIDC_RP_CLIENT_SECRET:
    raise ImproperlyConfigured("OIDC_CLIENT_SECRET (or OIDC_CLIENT_SECRET_FILE) must be set")
if OIDC_ISSUER and not OIDC_ISSUER.startswith(("https://", "http://")):
    raise ImproperlyConfigured(f"OIDC_ISSUER must be a URL (https://...), not {OIDC_ISSUER!r}")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")  # "Sign in with <this>"
# The scopes asked for: many providers (Keycloak, Dex, Authelia) send the groups claim only
# for a "groups" scope: add it here (a provider that does not know a scope may refuse it).
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
# The claims (of the ID token and the userinfo answer, the latter winning) that give the
# portal username (it must be a valid one: letters, digits, . @ + - _; else the sign-in is
# refused), the e-mail and the groups (a list of names; DIRECTORY_GROUPS maps them). Users are
# matched by username: an existing account of another kind (a local or LDAP one) of the same
# name is not taken over, and e-mail addresses are never used to match.
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_EMAIL_CLAIM = env_str("OIDC_EMAIL_CLAIM", "email")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# Off: only users that already have a (single sign-on) account here may sign in.
OIDC_CREATE_USER = env_bool("OIDC_CREATE_USERS", True)
# The ID token's signature: RS256 (or ES256...) with the provider's published keys (JWKS).
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
if not OIDC_RP_SIGN_ALGO.startswith(("RS", "ES")):
    raise ImproperlyConfigured(f"OIDC_SIGN_ALGO must be RS* or ES*, not {OIDC_RP_SIGN_ALGO!r}")
# How the portal authenticates to the token endpoint: HTTP Basic (client_secret_basic, the
# default of OpenID Connect) or, when false, the secret in the form (client_secret_post).
OIDC_TOKEN_USE_BASIC_AUTH = env_bool("OIDC_TOKEN_USE_BASIC_AUTH", True)
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT_SECONDS", 10.0, minimum=0.1)  # each call to the provider
# mozilla-django-oidc's own settings, fixed: PKCE (S256) and a nonce on every sign-in, the ID
# token kept in the session (the id_token_hint of RP-initiated logout), the portal's views.
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc-callback"
LOGIN_REDIRECT_URL_FAILURE = "login"

# The directory first (it leaves the portal's own accounts to the next backend), then the
# portal's accounts; each checks a session's account at each request (accounts.ldap_backend:
# LOCAL_ACCOUNTS, and a directory account still in the directory).
AUTHENTICATION_BACKENDS = [
    *(["accounts.ldap_backend.LDAPBackend"] if LDAP_SERVER_URI else []),
    *(["accounts.oidc.OIDCBackend"] if OIDC_ENABLED else []),
    "accounts.ldap_backend.LocalAccountBackend",
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

# The Kubernetes backend (CLUSTER_BACKEND=kubernetes; backends/kubernetes/).
K8S_IN_CLUSTER = env_bool("K8S_IN_CLUSTER", False)  # else a kubeconfig
K8S_KUBECONFIG = env_str("K8S_KUBECONFIG", "")  # "" = $KUBECONFIG or ~/.kube/config
K8S_CONTEXT = env_str("K8S_CONTEXT", "")  # "" = the kubeconfig's current context
K8S_NAMESPACE = env_str("K8S_NAMESPACE", "default")
K8S_GPU_RESOURCE = env_str("K8S_GPU_RESOURCE", "nvidia.com/gpu")
K8S_GPU_TYPE_LABEL = env_str("K8S_GPU_TYPE_LABEL", "gpu-portal/gpu-type")
K8S_IMAGE_PULL_POLICY = env_str("K8S_IMAGE_PULL_POLICY", "IfNotPresent")
K8S_NODE_SELECTOR = env_pairs("K8S_NODE_SELECTOR")  # key=value,... for every job's pods
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

# The Slurm backend (CLUSTER_BACKEND=slurm; backends/slurm/): this machine is a submit host of
# the site's cluster (Slurm's client commands, its slurm.conf and munge key), and SLURM_ROOT is
# a directory it shares with every node at the same path (the tasks' directories and logs).
SLURM_CONF = env_str("SLURM_CONF", "")  # "" = the commands' default (/etc/slurm/slurm.conf)
SLURM_ROOT = Path(env_str("SLURM_ROOT", str(VAR_DIR / "slurm")))
SLURM_PARTITION = env_str("SLURM_PARTITION", "")  # "" = the cluster's default partition
SLURM_VC_PARTITIONS = env_pairs("SLURM_VC_PARTITIONS")  # vc=partition,...: a VC's own partition
# user=account,...: a portal user's jobs run as that Unix account of the cluster (a name known
# here, or uid[:gid]; the portal must run as root); anyone else's as the portal's own account.
SLURM_USER_ACCOUNTS = env_pairs("SLURM_USER_ACCOUNTS")
SLURM_STOP_GRACE_SECONDS = env_int("SLURM_STOP_GRACE_SECONDS", 10, minimum=0)
SLURM_COMMAND_TIMEOUT_SECONDS = env_float("SLURM_COMMAND_TIMEOUT_SECONDS", 30.0, minimum=1.0)
# The directories (and logs) of finished attempts are removed this long after the attempt ended.
SLURM_KEEP_FINISHED_HOURS = env_int("SLURM_KEEP_FINISHED_HOURS", 24, minimum=0)

# Alerts (notify/): e-mail and signed webhooks to a job's owner when it ends, fails, is stopped
# or preempted, or has waited too long, and the portal's own alerts to admins (README
# "Alerts"). Sent by the Celery worker from an outbox table: never twice for one event.
# The address of the portal as its users reach it: the link in each alert.
PORTAL_URL = env_str("PORTAL_URL", f"http://localhost:{PORT}").rstrip("/")
# E-mail through Django's SMTP backend; no EMAIL_HOST: the portal sends no e-mail (the page
# says so). EMAIL_USE_TLS: STARTTLS (port 587); EMAIL_USE_SSL: TLS from the start (port 465).
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL: set one of them, not both")
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
# A delivery that fails is tried again after NOTIFY_RETRY_SECONDS, doubling each time up to
# NOTIFY_RETRY_MAX_SECONDS, NOTIFY_MAX_TRIES times in all (the defaults: about 2 hours), then
# shown as failed on its owner's alerts page. Beat's sweep (every NOTIFY_SWEEP_SECONDS) sends
# what was left unsent, and finds long waits and the portal's alerts.
NOTIFY_MAX_TRIES = env_int("NOTIFY_MAX_TRIES", 10, minimum=1)
NOTIFY_RETRY_SECONDS = env_float("NOTIFY_RETRY_SECONDS", 30.0, minimum=0.01)
NOTIFY_RETRY_MAX_SECONDS = env_float("NOTIFY_RETRY_MAX_SECONDS", 1800.0, minimum=0.01)
NOTIFY_SWEEP_SECONDS = env_float("NOTIFY_SWEEP_SECONDS", 60.0, minimum=1.0)
# Webhooks: connect and read timeout; addresses a webhook may not reach (CIDRs), checked when
# it is saved and again, on the address connected to, at each delivery, so that no user aims
# the worker at this host's services or a cloud's metadata address. The hosts of DATABASE_URL
# and REDIS_URL are refused too. WEBHOOK_ALLOWED_NETWORKS: exceptions (a receiver on this
# host: 127.0.0.1/32); the database's and Redis's own ports stay refused.
WEBHOOK_TIMEOUT_SECONDS = env_float("WEBHOOK_TIMEOUT_SECONDS", 10.0, minimum=0.1)
WEBHOOK_BLOCKED_NETWORKS = env_list(
    "WEBHOOK_BLOCKED_NETWORKS",
    [
        "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "100.100.100.200/32", "224.0.0.0/4",
        "255.255.255.255/32", "::/128", "::1/128", "fe80::/10", "fd00:ec2::254/128", "ff00::/8",
    ],
)  # fmt: skip
WEBHOOK_ALLOWED_NETWORKS = env_list("WEBHOOK_ALLOWED_NETWORKS", [])
for _network in WEBHOOK_BLOCKED_NETWORKS + WEBHOOK_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"WEBHOOK_*_NETWORKS: {_exc}") from None
