"""A protected resource (an app's own API) beside the test authorization server, answering the
challenges an API sends (RFC 6750 3, RFC 9449 7 and 9, RFC 9470, RFC 9728) on demand.

  GET|POST /api/notes     takes the server's access tokens as /userinfo does (Bearer, or DPoP
                          with a proof carrying ath; the current nonce when the DPoP switch
                          resource_nonce is on: 401 DPoP error="use_dpop_nonce" + DPoP-Nonce).
                          200 {"sub", "method", "acr", "auth_time"} for a good token; 401
                          error="invalid_token" for a missing, unknown, expired or revoked one,
                          or while invalid_token_next is armed; 401
                          error="insufficient_user_authentication" with acr_values / max_age
                          when the token's sign-in does not meet the policy below.
  GET /.well-known/oauth-protected-resource/api/notes   its RFC 9728 metadata: resource
                          http://HOST/api/notes, authorization_servers [the issuer] (what the
                          resource_metadata mode says).

Control (JSON in, JSON out): POST /__test/resource with any of
  invalid_token_next: n   the next n requests with a good token are refused invalid_token
  acr_values: [..]|null   the token's sign-in must have one of these acr (step-up)
  max_age: s|null         the token's sign-in must be at most s seconds old (step-up)
  resource_metadata: null|"own"|"foreign"|"other_resource"|"not_json"   every 401 names the
                          metadata URL; the document names this server, another
                          authorization server, another resource, or is not JSON
  age_sign_ins: s         every existing sign-in becomes s seconds older (its auth_time)
GET /__test/resource: the policy and the counters (requests, ok, refused, forced_invalid,
step_ups, metadata_requests). /__test/reset clears it all.
"""

import json
import time

from flask import jsonify, request

FOREIGN_ISSUER = "https://foreign-as.example/"
METADATA_MODES = {None, "own", "foreign", "other_resource", "not_json"}
POLICY_KEYS = {"invalid_token_next", "acr_values", "max_age", "resource_metadata", "age_sign_ins"}


def fresh():
    return {"invalid_token_next": 0, "acr_values": None, "max_age": None, "resource_metadata": None,
            "counters": {"requests": 0, "ok": 0, "refused": 0, "forced_invalid": 0, "step_ups": 0,
                         "metadata_requests": 0}}


STATE = fresh()


def reset():
    STATE.clear()
    STATE.update(fresh())


def install(app, srv):
    """Adds the routes to `app`; `srv` is the server module (LOCK, STATE, find_token, ...)."""

    def count(name):
        STATE["counters"][name] += 1

    def metadata_url():
        return f"http://{request.host}/.well-known/oauth-protected-resource/api/notes"

    def challenge(scheme, error, **params):
        parts = [f'error="{error}"']
        for name, value in params.items():
            if value is not None:
                parts.append(f'{name}="{value}"')
        if STATE["resource_metadata"]:
            parts.append(f'resource_metadata="{metadata_url()}"')
        return f"{scheme} " + ", ".join(parts)

    def refuse(scheme, error, extra_headers=None, **params):
        count("refused")
        headers = {"WWW-Authenticate": challenge(scheme, error, **params), "Cache-Control": "no-store"}
        headers.update(extra_headers or {})
        return jsonify({"error": error}), 401, headers

    @app.route("/api/notes", methods=["GET", "POST"])
    def api_notes():
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        value = value.strip()
        answer_scheme = "DPoP" if scheme.lower() == "dpop" else "Bearer"
        with srv.LOCK:
            count("requests")
            tok = srv.find_token(value) if scheme.lower() in ("bearer", "dpop") else None
            if tok is not None and (tok.rec.get("jkt") or scheme.lower() == "dpop"):
                try:
                    jkt = srv.check_dpop(request.method, access_token=value,
                                         nonce_required=bool(srv.STATE["dpop"]["resource_nonce"]))
                except srv.dpop.ProofError as error:
                    srv.bump("dpop_nonce_challenges" if error.error == "use_dpop_nonce" else "dpop_invalid_proofs")
                    extra = {"DPoP-Nonce": error.nonce} if error.nonce else {}
                    return refuse("DPoP", error.error, extra, algs="ES256")
                if scheme.lower() != "dpop" or jkt is None or jkt != tok.rec.get("jkt"):
                    tok = None
            if tok is None or tok.kind != "access" or tok.is_revoked() or tok.is_expired():
                return refuse(answer_scheme, "invalid_token")
            if STATE["invalid_token_next"] > 0:
                STATE["invalid_token_next"] -= 1
                count("forced_invalid")
                return refuse(answer_scheme, "invalid_token")
            family = srv.STATE["families"].get(tok.rec["family"]) or {}
            acr, auth_time = family.get("acr"), family.get("auth_time")
            wanted_acr, max_age = STATE["acr_values"], STATE["max_age"]
            too_weak = wanted_acr is not None and acr not in wanted_acr
            too_old = max_age is not None and (auth_time is None or time.time() - auth_time > max_age)
            if too_weak or too_old:
                count("step_ups")
                return refuse(answer_scheme, "insufficient_user_authentication",
                              error_description="A stronger or more recent sign-in is required",
                              acr_values=" ".join(wanted_acr) if wanted_acr else None,
                              max_age=max_age)
            count("ok")
            return jsonify({"sub": tok.rec["sub"], "method": request.method, "acr": acr, "auth_time": auth_time})

    @app.get("/.well-known/oauth-protected-resource/api/notes")
    def api_notes_metadata():
        with srv.LOCK:
            count("metadata_requests")
            mode = STATE["resource_metadata"] or "own"
            issuer = srv.token_iss()
        if mode == "not_json":
            return "<html>not metadata</html>", 200, {"Content-Type": "text/html"}
        resource = f"http://{request.host}/api/notes"
        if mode == "other_resource":
            resource = f"http://{request.host}/api/other"
        servers = [FOREIGN_ISSUER] if mode == "foreign" else [issuer]
        return jsonify({"resource": resource, "authorization_servers": servers,
                        "bearer_methods_supported": ["header"],
                        "dpop_signing_alg_values_supported": ["ES256"]})

    @app.route("/__test/resource", methods=["GET", "POST"])
    def resource_control():
        if request.method == "POST":
            body = request.get_json(force=True, silent=True) or {}
            unknown = set(body) - POLICY_KEYS
            if unknown:
                return srv.bad(f"unknown resource keys: {sorted(unknown)}")
            if body.get("resource_metadata", None) not in METADATA_MODES:
                return srv.bad(f"resource_metadata must be one of {sorted(m for m in METADATA_MODES if m)} or null")
            if "acr_values" in body and body["acr_values"] is not None and not (
                    isinstance(body["acr_values"], list) and all(isinstance(v, str) and v for v in body["acr_values"])):
                return srv.bad("acr_values must be a list of strings or null")
            for key in ("invalid_token_next", "max_age", "age_sign_ins"):
                if body.get(key) is not None and not (isinstance(body[key], int) and body[key] >= 0):
                    return srv.bad(f"{key} must be a non-negative integer")
            with srv.LOCK:
                for key in ("invalid_token_next", "acr_values", "max_age", "resource_metadata"):
                    if key in body:
                        STATE[key] = body[key]
                if body.get("age_sign_ins"):
                    for family in srv.STATE["families"].values():
                        if family.get("auth_time") is not None:
                            family["auth_time"] -= body["age_sign_ins"]
        with srv.LOCK:
            return jsonify(json.loads(json.dumps(STATE)))
