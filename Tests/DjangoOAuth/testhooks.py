"""Test hooks of the DOT test project: counts of token-endpoint requests, a health check,
the access-token lifetime, the test user's credentials for the login page. Not DOT's code:
DOT itself is used unchanged."""
import json
import sys
import threading

from django.http import HttpResponse, JsonResponse

# Set by serve.py before the first request.
CREDENTIALS = {"username": "", "password": ""}

_lock = threading.Lock()
_counts = {"authorization_code": 0, "refresh_token": 0, "refresh_token_ok": 0, "revocations": 0, "authorize": 0}


class CountingMiddleware:
    """Counts token and revocation requests by grant type; logs method, path and status
    (never a query string or body) to stderr."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        grant = request.POST.get("grant_type", "") if request.path == "/o/token/" and request.method == "POST" else ""
        response = self.get_response(request)
        with _lock:
            if grant in ("authorization_code", "refresh_token"):
                _counts[grant] += 1
                if grant == "refresh_token" and response.status_code == 200:
                    _counts["refresh_token_ok"] += 1
            elif request.path == "/o/revoke_token/" and request.method == "POST":
                _counts["revocations"] += 1
            elif request.path == "/o/authorize/":
                _counts["authorize"] += 1
        print(f"{request.method} {request.path} {response.status_code}", file=sys.stderr, flush=True)
        return response


def credentials(request):
    """Context processor: the login page submits the test user's credentials itself."""
    return {"test_username": CREDENTIALS["username"], "test_password": CREDENTIALS["password"]}


def health(request):
    return HttpResponse("ok", content_type="text/plain")


def stats(request):
    with _lock:
        return JsonResponse(dict(_counts))


def access_ttl(request):
    """GET /__test/access-ttl?seconds=N: the lifetime of access tokens issued from now on."""
    from oauth2_provider.settings import oauth2_settings

    oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS = int(request.GET["seconds"])
    return JsonResponse({"access_token_expire_seconds": oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS})


def read_api():
    """GET /api/read: an API DOT protects (scope "read"), 200 for a live access token,
    403 for a revoked, expired or unknown one: DOT's own resource-server check."""
    from oauth2_provider.views.generic import ScopedProtectedResourceView

    class ReadAPI(ScopedProtectedResourceView):
        required_scopes = ["read"]

        def get(self, request, *args, **kwargs):
            return JsonResponse({"ok": True})

    return ReadAPI.as_view()
