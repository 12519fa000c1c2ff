"""DOT at its own mount path, /o/; a login page; an API DOT protects; the test hooks under /__test/."""
from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import urls as oauth2_urls

import testhooks

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    # RFC 8414's metadata at the origin's /.well-known/oauth-authorization-server/o, mounted at the
    # root as DOT's docs/oauth2_server_metadata.rst asks of a prefixed deployment.
    path("", include((oauth2_urls.metadata_urlpatterns, "oauth2_provider_metadata"))),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="login.html"), name="login"),
    path("api/read", testhooks.read_api()),
    path("__test/health", testhooks.health),
    path("__test/stats", testhooks.stats),
    path("__test/access-ttl", testhooks.access_ttl),
]
