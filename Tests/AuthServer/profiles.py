"""Provider profiles of the test authorization server (issue 26).

One server, several shapes: each profile names the issuer, the discovery document's
endpoints and the provider's quirks, after ../shared/reviews/providers-oidc.md. The server
keeps serving its Auth0-shaped routes inside; `rewrite(path, host)` maps a profile's
public path onto them, and a profile other than auth0 answers 404 to the Auth0 paths
themselves, so a client that guessed Auth0's paths fails.

  auth0     issuer {base}/ (trailing slash), Auth0's paths (the default)
  okta      issuer {base}/oauth2/default, /oauth2/default/v1/{authorize,token,revoke,keys};
            the OIDC document has no revocation_endpoint, the RFC 8414 one has it
  keycloak  issuer {base}/realms/test, /realms/test/protocol/openid-connect/{auth,token,
            revoke,certs}; authorization_response_iss_parameter_supported (RFC 9207)
  entra     configured issuer {base}/common/v2.0; discovery issuer {base}/{tenantid}/v2.0,
            tokens carry tid and iss {base}/<tid>/v2.0; no revocation endpoint; a refresh
            rotates but the old refresh token stays valid
  google    issuer {base} (no slash), tokens say iss "127.0.0.1:PORT" (the scheme-less
            spelling), no rotation, a refresh token without offline_access (Google's
            access_type=offline is implied), revocation on another host (localhost:PORT)
"""

ENTRA_TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"

# Internal routes of server.py each public endpoint name maps to.
INTERNAL = {
    "authorization": "/authorize",
    "token": "/oauth/token",
    "revocation": "/oauth/revoke",
    "jwks": "/.well-known/jwks.json",
    "discovery": "/__profile/openid-configuration",
    "as_metadata": "/__profile/oauth-authorization-server",
}

PROFILES = {
    "auth0": {},
    "okta": {
        "issuer": "oauth2/default",
        "paths": {"authorization": "oauth2/default/v1/authorize", "token": "oauth2/default/v1/token",
                  "revocation": "oauth2/default/v1/revoke", "jwks": "oauth2/default/v1/keys"},
        "revocation_only_in_rfc8414": True,
    },
    "keycloak": {
        "issuer": "realms/test",
        "paths": {"authorization": "realms/test/protocol/openid-connect/auth",
                  "token": "realms/test/protocol/openid-connect/token",
                  "revocation": "realms/test/protocol/openid-connect/revoke",
                  "jwks": "realms/test/protocol/openid-connect/certs"},
        "iss_parameter": True,
    },
    "entra": {
        "issuer": "common/v2.0",
        "issuer_template": "{tenantid}/v2.0",
        "paths": {"authorization": "common/oauth2/v2.0/authorize", "token": "common/oauth2/v2.0/token",
                  "jwks": "common/discovery/v2.0/keys"},
        "tenant": ENTRA_TENANT,
        "old_refresh_tokens_stay_valid": True,
    },
    "google": {
        "issuer": None,  # {base} without its trailing slash
        "paths": {"authorization": "o/oauth2/v2/auth", "token": "token", "revocation": "revoke",
                  "jwks": "oauth2/v3/certs"},
        "revocation_host": "localhost",
        "schemeless_iss": True,
        "no_rotation": True,
        "refresh_without_offline_access": True,
        "scopes": ["openid", "email", "profile", "read:items", "write:items"],
    },
}


def configured_issuer(name, base):
    """The issuer an app configures for profile `name` (base is "http://127.0.0.1:PORT/")."""
    p = PROFILES[name]
    if not p:
        return base
    if p["issuer"] is None:
        return base.rstrip("/")
    return base + p["issuer"]


def document_issuer(name, base):
    """The `issuer` of the profile's discovery document (Entra's is a template)."""
    p = PROFILES[name]
    if p.get("issuer_template"):
        return base + p["issuer_template"]
    return configured_issuer(name, base)


def token_issuer(name, base):
    """The `iss` of the profile's ID tokens."""
    p = PROFILES[name]
    if p.get("issuer_template"):
        return base + p["issuer_template"].replace("{tenantid}", p["tenant"])
    if p.get("schemeless_iss"):
        return base.removeprefix("http://").rstrip("/")
    return configured_issuer(name, base)


def endpoint_url(name, base, endpoint):
    p = PROFILES[name]
    path = p["paths"].get(endpoint)
    if path is None:
        return None
    if endpoint == "revocation" and p.get("revocation_host"):
        return base.replace("127.0.0.1", p["revocation_host"], 1) + path
    return base + path


def discovery_path(name):
    p = PROFILES[name]
    prefix = "/" + p["issuer"] if p.get("issuer") else ""
    return prefix + "/.well-known/openid-configuration"


def rewrite(name, path, host):
    """The internal path for `path` under profile `name`; None: answer 404."""
    p = PROFILES.get(name) or {}
    if not p:
        return path
    if path == discovery_path(name):
        return INTERNAL["discovery"]
    if path in (INTERNAL["authorization"], INTERNAL["token"], INTERNAL["revocation"], INTERNAL["jwks"],
                "/.well-known/openid-configuration"):
        return None  # Auth0's paths do not exist at this provider
    prefix = "/" + p["issuer"] if p.get("issuer") else ""
    if path == prefix + "/.well-known/oauth-authorization-server":
        return INTERNAL["as_metadata"]
    for endpoint, public in p["paths"].items():
        if path == "/" + public:
            if endpoint == "revocation" and p.get("revocation_host"):
                if not (host or "").startswith(p["revocation_host"] + ":"):
                    return None
            return INTERNAL[endpoint]
    return path
