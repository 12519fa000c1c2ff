"""ES256 verdicts in bulk from the test server's own verifier (dpop.public_key, dpop.verify_es256).

Reads a JSON array on stdin, each element {"jwk": {...}, "msg": HEX, "sig": HEX}; writes a JSON
array of the same length: "valid", "invalid", or "key: <why>" when dpop.public_key refuses the
JWK (a proof carrying it would be refused the same way). Used by the Wycheproof suite
(Tests/AuthSessionTests/WycheproofES256Tests.swift) for the ECDSA P-256 P1363 vectors and for the
signatures TokenStore's own signers make, so both meet the code that checks every DPoP proof.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpop  # noqa: E402  (beside this file)


def verdict(case):
    try:
        key = dpop.public_key(case["jwk"])
    except dpop.ProofError as error:
        return f"key: {error.description}"
    ok = dpop.verify_es256(key, bytes.fromhex(case["msg"]), bytes.fromhex(case["sig"]))
    return "valid" if ok else "invalid"


def main():
    cases = json.load(sys.stdin)
    json.dump([verdict(case) for case in cases], sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
