"""DPoP (RFC 9449) proof checks for the test authorization server (issue 27, item 4).

Authlib has no DPoP, so proofs are verified here with `cryptography`: ES256 only (what
Auth0 accepts from a native app and what TokenStore makes), the public key from the
proof's `jwk` header, the RFC 7638 thumbprint as the key's name (`jkt`).

`check(proof, method, url, state, now, access_token=None)` returns the thumbprint or raises
`ProofError(error, description, nonce=None)`: `invalid_dpop_proof` for a bad proof,
`use_dpop_nonce` (with the nonce the client must use) when the nonce is missing or stale.
`state` is the server's DPoP state (see `fresh_state`), a plain JSON-able dict kept in the
server's STATE under its lock. A proof's `jti` is remembered once its signature verified,
nonce-refused proofs included, so a retry that reuses a `jti` is a replay.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import urllib.parse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

DEFAULT_IAT_WINDOW = 60  # seconds a proof's iat may be off the server's clock, either way


def fresh_state():
    return {
        "nonce": secrets.token_urlsafe(16),  # the one nonce the token endpoint accepts now
        "nonce_required": True,  # Auth0 requires a nonce from public clients
        "required": False,  # True: a token request without a proof is refused
        "iat_window": DEFAULT_IAT_WINDOW,
        "reject_next": 0,  # the next N good proofs are answered use_dpop_nonce (a new nonce each)
        "resource_nonce": False,  # True: /userinfo (the resource server) requires the nonce too
        "ignore_proofs": False,  # True: a server without DPoP (proofs ignored, tokens Bearer)
        "jtis": {},  # jti -> the time it may be forgotten (iat window after its iat)
    }


class ProofError(Exception):
    def __init__(self, error, description, nonce=None):
        super().__init__(description)
        self.error = error
        self.description = description
        self.nonce = nonce


def b64url_decode(text: str) -> bytes:
    if not isinstance(text, str) or not text or any(c in text for c in "+/="):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict) -> str:
    """RFC 7638: SHA-256 of the required members in lexicographic order, no whitespace."""
    canonical = json.dumps({"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"], "y": jwk["y"]},
                           separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


def access_token_hash(token: str) -> str:
    return b64url(hashlib.sha256(token.encode("ascii")).digest())


def normalize_htu(url: str) -> str:
    """The URL without query and fragment, scheme and host lowercased (RFC 9449 4.3)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", "", ""))


def public_key(jwk):
    if not isinstance(jwk, dict) or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        raise ProofError("invalid_dpop_proof", "the jwk must be an EC P-256 public key")
    if "d" in jwk:
        raise ProofError("invalid_dpop_proof", "the jwk holds a private key")
    try:
        x, y = b64url_decode(jwk["x"]), b64url_decode(jwk["y"])
        if len(x) != 32 or len(y) != 32:
            raise ValueError("coordinate length")
        return ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"),
                                             ec.SECP256R1()).public_key()
    except (KeyError, ValueError) as error:
        raise ProofError("invalid_dpop_proof", f"the jwk is not a P-256 point ({error})") from None


def verify_es256(key, message: bytes, signature: bytes) -> bool:
    """ES256 as JWS has it (RFC 7518 3.4): `signature` is r||s, 32 bytes each, of SHA-256 of
    `message` under the P-256 public `key`. False for any other length or a signature that does
    not verify (the Wycheproof vectors check this function: Tests/AuthServer/es256_verify.py)."""
    if len(signature) != 64:
        return False
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        key.verify(der, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def prune(state, now):
    jtis = state["jtis"]
    for jti in [j for j, until in jtis.items() if until <= now]:
        del jtis[jti]


def rotate_nonce(state):
    state["nonce"] = secrets.token_urlsafe(16)
    return state["nonce"]


def check(proof, method, url, state, now, access_token=None, nonce_required=None):
    """Verify one proof; the thumbprint of its key, or ProofError."""
    if not isinstance(proof, str) or proof.count(".") != 2:
        raise ProofError("invalid_dpop_proof", "the DPoP header is not a compact JWS")
    head_b64, claims_b64, sig_b64 = proof.split(".")
    try:
        header = json.loads(b64url_decode(head_b64))
        claims = json.loads(b64url_decode(claims_b64))
        signature = b64url_decode(sig_b64)
    except ValueError:
        raise ProofError("invalid_dpop_proof", "the proof is not base64url JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ProofError("invalid_dpop_proof", "the proof's header and claims must be objects")
    if header.get("typ") != "dpop+jwt":
        raise ProofError("invalid_dpop_proof", "typ must be dpop+jwt")
    if header.get("alg") != "ES256":
        raise ProofError("invalid_dpop_proof", "alg must be ES256")
    key = public_key(header.get("jwk"))
    if len(signature) != 64:
        raise ProofError("invalid_dpop_proof", "an ES256 signature is r||s, 64 bytes (not DER)")
    if not verify_es256(key, f"{head_b64}.{claims_b64}".encode("ascii"), signature):
        raise ProofError("invalid_dpop_proof", "the proof's signature does not verify")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise ProofError("invalid_dpop_proof", "jti is missing")
    iat = claims.get("iat")
    if not isinstance(iat, (int, float)) or isinstance(iat, bool):
        raise ProofError("invalid_dpop_proof", "iat is missing")
    window = float(state.get("iat_window", DEFAULT_IAT_WINDOW))
    if abs(now - iat) > window:
        raise ProofError("invalid_dpop_proof", "iat is outside the accepted window")
    prune(state, now)
    if jti in state["jtis"]:
        raise ProofError("invalid_dpop_proof", "jti was already used (a replayed proof)")
    state["jtis"][jti] = max(now, iat) + window
    if claims.get("htm") != method:
        raise ProofError("invalid_dpop_proof", f"htm must be {method}")
    htu = claims.get("htu")
    if not isinstance(htu, str) or normalize_htu(htu) != normalize_htu(url) or "?" in htu or "#" in htu:
        raise ProofError("invalid_dpop_proof", "htu does not name this endpoint")
    if access_token is not None:
        if claims.get("ath") != access_token_hash(access_token):
            raise ProofError("invalid_dpop_proof", "ath is not the hash of the access token")
    required = state.get("nonce_required", True) if nonce_required is None else nonce_required
    if required:
        if state.get("reject_next", 0) > 0:
            state["reject_next"] -= 1
            raise ProofError("use_dpop_nonce", "the authorization server requires a new nonce",
                             nonce=rotate_nonce(state))
        if claims.get("nonce") != state["nonce"]:
            raise ProofError("use_dpop_nonce", "the authorization server requires a nonce in the DPoP proof",
                             nonce=state["nonce"])
    return thumbprint(header["jwk"])
