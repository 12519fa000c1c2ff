"""Settings of the tiny Django project that serves django-oauth-toolkit (DOT) for the tests.

Configured as DOT's documentation says: OIDC on, RS256 with a key generated at setup, PKCE
required, DOT's own mount path (/o/) and issuer (http://127.0.0.1:PORT/o), refresh-token
rotation left at DOT's default. Everything else comes from the environment serve.py sets
(DOT_STATE_DIR, DOT_PORT); nothing here is a secret of anyone's.
"""
import os
from pathlib import Path

STATE_DIR = Path(os.environ["DOT_STATE_DIR"])
PORT = int(os.environ["DOT_PORT"])
BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = (STATE_DIR / "django-secret").read_text()
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
USE_TZ = True
ROOT_URLCONF = "urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "testhooks.CountingMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.template.context_processors.csrf",
        "testhooks.credentials",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE_DIR / "db.sqlite3"}}
LOGIN_URL = "/accounts/login/"

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (STATE_DIR / "oidc-rsa.pem").read_text(),
    "OIDC_ISS_ENDPOINT": f"http://127.0.0.1:{PORT}/o",
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email", "read": "Read"},
    "DEFAULT_SCOPES": ["openid"],
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    # DOT builds its oauthlib server once per view and keeps it; a test changes the access
    # token lifetime (/__test/access-ttl), so the server is built per request.
    "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
}
