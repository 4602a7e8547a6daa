"""A private Sigstore instance on loopback, for kbuild's signing tests (dev only).

It speaks the real protocols and does the real cryptography, so that a bundle it helps make
verifies with any Sigstore verifier given its trusted root, and a wrong one does not:

- an OIDC issuer shaped as GitHub Actions' (`ACTIONS_ID_TOKEN_REQUEST_URL`): `GET /token`
  with the request bearer answers `{"value": <JWT>}`, an ES256 token with GitHub's claims
  (`iss` https://token.actions.githubusercontent.com, `job_workflow_ref`, `repository`, ...);
  the workflow and repository come from the query (`?repository=org/name&workflow=build.yaml`);
- a Fulcio (`POST /api/v2/signingCert`): checks the token's signature, issuer, audience and
  expiry and the proof of possession (the `sub` signed by the requested key), and issues a
  10-minute certificate from its intermediate CA with Fulcio's OIDC extensions for GitHub
  Actions (issuer, build signer URI, source repository, ...) and an embedded SCT signed by its
  CT log key over the precertificate, as RFC 6962 says;
- a Rekor v1 (`POST /api/v1/log/entries`, `hashedrekord` 0.0.1): checks the entry's signature
  against its certificate, appends the entry to an RFC 6962 Merkle tree and answers with the
  inclusion proof, a signed checkpoint (a signed note) and the signed entry timestamp.

It writes `trust_config.json` (a `ClientTrustConfig`: the trusted root and the signing
config naming these URLs) and `trusted_root.json` into `--dir`, then prints `ready <url>`.
Needs only the `cryptography` package. Stops on stdin EOF or SIGTERM.
"""

import argparse
import base64
import datetime
import hashlib
import json
import os
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed,
    decode_dss_signature,
    encode_dss_signature,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
FULCIO_OID = "1.3.6.1.4.1.57264.1."
SCT_LIST_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
ORIGIN = "kbuild-standin.rekor - 1"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def spki(key) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def der_utf8(text: str) -> bytes:
    data = text.encode()
    assert len(data) < 128 or len(data) < 65536
    if len(data) < 128:
        return bytes([0x0C, len(data)]) + data
    if len(data) < 256:
        return bytes([0x0C, 0x81, len(data)]) + data
    return bytes([0x0C, 0x82]) + struct.pack(">H", len(data)) + data


def der_octets(data: bytes) -> bytes:
    if len(data) < 128:
        return bytes([0x04, len(data)]) + data
    if len(data) < 256:
        return bytes([0x04, 0x81, len(data)]) + data
    return bytes([0x04, 0x82]) + struct.pack(">H", len(data)) + data


class Merkle:
    """An RFC 6962 Merkle tree of leaf hashes."""

    def __init__(self):
        self.leaves = []

    @staticmethod
    def leaf_hash(data: bytes) -> bytes:
        return hashlib.sha256(b"\x00" + data).digest()

    @staticmethod
    def split(n: int) -> int:
        k = 1
        while k * 2 < n:
            k *= 2
        return k

    def root(self, leaves=None) -> bytes:
        leaves = self.leaves if leaves is None else leaves
        if len(leaves) == 1:
            return leaves[0]
        k = self.split(len(leaves))
        return hashlib.sha256(b"\x01" + self.root(leaves[:k]) + self.root(leaves[k:])).digest()

    def path(self, m: int, leaves=None) -> list:
        leaves = self.leaves if leaves is None else leaves
        if len(leaves) == 1:
            return []
        k = self.split(len(leaves))
        if m < k:
            return self.path(m, leaves[:k]) + [self.root(leaves[k:])]
        return self.path(m - k, leaves[k:]) + [self.root(leaves[:k])]


class Instance:
    """The keys, CA and log of the stand-in."""

    def __init__(self, url: str):
        self.url = url
        curve = ec.SECP256R1()
        self.oidc_key = ec.generate_private_key(curve)
        self.root_key = ec.generate_private_key(curve)
        self.inter_key = ec.generate_private_key(curve)
        self.ct_key = ec.generate_private_key(curve)
        self.rekor_key = ec.generate_private_key(curve)
        self.rekor_id = hashlib.sha256(spki(self.rekor_key)).digest()
        self.ct_id = hashlib.sha256(spki(self.ct_key)).digest()
        self.lock = threading.Lock()
        self.tree = Merkle()
        self.request_bearer = os.urandom(16).hex()
        start = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
        end = datetime.datetime(2040, 1, 1, tzinfo=datetime.timezone.utc)
        self.root = self.ca_cert(
            "kbuild stand-in root", self.root_key, None, start, end
        )
        self.inter = self.ca_cert(
            "kbuild stand-in intermediate", self.inter_key, self.root, start, end
        )

    def ca_cert(self, name, key, issuer, start, end):
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kbuild-standin"),
                x509.NameAttribute(NameOID.COMMON_NAME, name),
            ]
        )
        signer = self.root_key if issuer is not None else key
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer.subject if issuer is not None else subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None if issuer is None else 0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        )
        return builder.sign(signer, hashes.SHA256())

    # --- OIDC -------------------------------------------------------------------------------

    def token(self, query: dict) -> str:
        repository = query.get("repository", "kbuild-test/relu")
        workflow = query.get("workflow", "build.yaml")
        ref = query.get("ref", "refs/heads/main")
        sha = query.get("sha", "0" * 40)
        audience = query.get("audience", "sigstore")
        now = int(time.time())
        workflow_ref = f"{repository}/.github/workflows/{workflow}@{ref}"
        claims = {
            "iss": GITHUB_ISSUER,
            "aud": audience,
            "sub": f"repo:{repository}:ref:{ref}",
            "iat": now,
            "nbf": now,
            "exp": now + int(query.get("lifetime", "300")),
            "repository": repository,
            "repository_owner": repository.split("/")[0],
            "repository_id": "1",
            "repository_owner_id": "1",
            "repository_visibility": "public",
            "ref": ref,
            "sha": sha,
            "workflow_ref": workflow_ref,
            "workflow_sha": sha,
            "job_workflow_ref": workflow_ref,
            "job_workflow_sha": sha,
            "event_name": "push",
            "run_id": "42",
            "run_attempt": "1",
            "runner_environment": "github-hosted",
        }
        header = {"alg": "ES256", "typ": "JWT", "kid": "standin"}
        signing_input = f"{b64url(canonical(header))}.{b64url(canonical(claims))}"
        der = self.oidc_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input}.{b64url(raw)}"

    def check_token(self, jwt: str) -> dict:
        try:
            head, body, sig = jwt.split(".")
        except ValueError:
            raise Refused(401, "the identity token is not a JWT")
        raw = b64url_decode(sig)
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        try:
            self.oidc_key.public_key().verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise Refused(401, "the identity token's signature does not verify")
        claims = json.loads(b64url_decode(body))
        if claims.get("iss") != GITHUB_ISSUER:
            raise Refused(401, f"unknown issuer {claims.get('iss')}")
        audience = claims.get("aud")
        if "sigstore" not in (audience if isinstance(audience, list) else [audience]):
            raise Refused(401, "the identity token is not for audience `sigstore`")
        if claims.get("exp", 0) < time.time():
            raise Refused(401, "the identity token has expired")
        return claims

    # --- Fulcio ------------------------------------------------------------------------------

    def signing_cert(self, request: dict, bearer: str | None) -> dict:
        """Fulcio's two request forms: a public key and a signed `sub`, or a CSR (the token in
        the body's credentials or as the request's bearer)."""
        token = request.get("credentials", {}).get("oidcIdentityToken") or bearer
        claims = self.check_token(token or "")
        if "certificateSigningRequest" in request:
            pem = base64.b64decode(request["certificateSigningRequest"])
            csr = x509.load_pem_x509_csr(pem)
            if not csr.is_signature_valid:
                raise Refused(400, "the CSR's signature does not verify")
            public_key = csr.public_key()
        else:
            key_request = request["publicKeyRequest"]
            public_key = serialization.load_pem_public_key(key_request["publicKey"]["content"].encode())
            proof = base64.b64decode(key_request["proofOfPossession"])
            try:
                public_key.verify(proof, claims["sub"].encode(), ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                raise Refused(400, "the proof of possession does not verify")
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        builder = self.leaf_builder(claims, public_key, now)
        precert = builder.sign(self.inter_key, hashes.SHA256())
        sct = self.sct(precert.tbs_certificate_bytes, int(now.timestamp() * 1000))
        cert = builder.add_extension(
            x509.UnrecognizedExtension(SCT_LIST_OID, der_octets(sct)), critical=False
        ).sign(self.inter_key, hashes.SHA256())
        assert cert.tbs_precertificate_bytes == precert.tbs_certificate_bytes
        pem = lambda c: c.public_bytes(serialization.Encoding.PEM).decode()
        chain = [pem(cert), pem(self.inter), pem(self.root)]
        return {"signedCertificateEmbeddedSct": {"chain": {"certificates": chain}}}

    def leaf_builder(self, claims, public_key, now):
        github = "https://github.com/"
        signer = github + claims["job_workflow_ref"]
        raw = {
            "1": claims["iss"],
            "2": claims["event_name"],
            "3": claims["sha"],
            "5": claims["repository"],
            "6": claims["ref"],
        }
        der = {
            "8": claims["iss"],
            "9": signer,
            "10": claims["job_workflow_sha"],
            "11": claims["runner_environment"],
            "12": github + claims["repository"],
            "13": claims["sha"],
            "14": claims["ref"],
            "15": claims["repository_id"],
            "16": github + claims["repository_owner"],
            "17": claims["repository_owner_id"],
            "18": github + claims["workflow_ref"],
            "19": claims["workflow_sha"],
            "20": claims["event_name"],
            "21": f"{github}{claims['repository']}/actions/runs/{claims['run_id']}/attempts/{claims['run_attempt']}",
            "22": claims["repository_visibility"],
        }
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.inter.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(minutes=10))
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.inter_key.public_key()),
                critical=False,
            )
            .add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(signer)]), critical=True
            )
        )
        for n, value in raw.items():
            oid = x509.ObjectIdentifier(FULCIO_OID + n)
            builder = builder.add_extension(x509.UnrecognizedExtension(oid, value.encode()), critical=False)
        for n, value in der.items():
            oid = x509.ObjectIdentifier(FULCIO_OID + n)
            builder = builder.add_extension(x509.UnrecognizedExtension(oid, der_utf8(value)), critical=False)
        return builder

    def sct(self, tbs: bytes, timestamp_ms: int) -> bytes:
        """A TLS-encoded SCT list holding one SCT for the precertificate `tbs` (RFC 6962 3.2)."""
        issuer_key_hash = hashlib.sha256(
            self.inter.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        ).digest()
        signed = (
            b"\x00\x00"
            + struct.pack(">Q", timestamp_ms)
            + b"\x00\x01"
            + issuer_key_hash
            + struct.pack(">I", len(tbs))[1:]
            + tbs
            + b"\x00\x00"
        )
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (
            b"\x00"
            + self.ct_id
            + struct.pack(">Q", timestamp_ms)
            + b"\x00\x00"
            + b"\x04\x03"
            + struct.pack(">H", len(signature))
            + signature
        )
        one = struct.pack(">H", len(sct)) + sct
        return struct.pack(">H", len(one)) + one

    # --- Rekor -------------------------------------------------------------------------------

    def log_entry(self, proposed: dict, _bearer=None) -> dict:
        if proposed.get("kind") != "hashedrekord" or proposed.get("apiVersion") != "0.0.1":
            raise Refused(400, "only hashedrekord 0.0.1 entries are accepted")
        spec = proposed["spec"]
        digest_hex = spec["data"]["hash"]["value"]
        if spec["data"]["hash"]["algorithm"] != "sha256":
            raise Refused(400, "only sha256 digests are accepted")
        signature = base64.b64decode(spec["signature"]["content"])
        cert_pem = base64.b64decode(spec["signature"]["publicKey"]["content"])
        cert = x509.load_pem_x509_certificate(cert_pem)
        try:
            cert.public_key().verify(
                signature, bytes.fromhex(digest_hex), ec.ECDSA(Prehashed(hashes.SHA256()))
            )
        except InvalidSignature:
            raise Refused(400, "the entry's signature does not verify with its certificate")
        # As Rekor canonicalizes an entry: the certificate re-encoded as plain PEM, whatever
        # line endings the client sent.
        canonical_cert = b64(cert.public_bytes(serialization.Encoding.PEM))
        body = canonical(
            {
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": digest_hex}},
                    "signature": {
                        "content": spec["signature"]["content"],
                        "publicKey": {"content": canonical_cert},
                    },
                },
            }
        )
        with self.lock:
            leaf = Merkle.leaf_hash(body)
            index = len(self.tree.leaves)
            self.tree.leaves.append(leaf)
            size = len(self.tree.leaves)
            root = self.tree.root()
            path = self.tree.path(index)
        integrated = int(time.time())
        log_id = self.rekor_id.hex()
        set_payload = canonical(
            {"body": b64(body), "integratedTime": integrated, "logID": log_id, "logIndex": index}
        )
        entry = {
            "body": b64(body),
            "integratedTime": integrated,
            "logID": log_id,
            "logIndex": index,
            "verification": {
                "inclusionProof": {
                    "checkpoint": self.checkpoint(size, root),
                    "hashes": [h.hex() for h in path],
                    "logIndex": index,
                    "rootHash": root.hex(),
                    "treeSize": size,
                },
                "signedEntryTimestamp": b64(self.rekor_key.sign(set_payload, ec.ECDSA(hashes.SHA256()))),
            },
        }
        return {leaf.hex(): entry}

    def checkpoint(self, size: int, root: bytes) -> str:
        note = f"{ORIGIN}\n{size}\n{b64(root)}\n"
        signature = self.rekor_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        name = ORIGIN.split(" ")[0]
        return f"{note}\n\u2014 {name} {b64(self.rekor_id[:4] + signature)}\n"

    # --- trust material ----------------------------------------------------------------------

    def trusted_root(self) -> dict:
        valid = {"start": "2020-01-01T00:00:00Z"}
        log = lambda key, key_id: {
            "baseUrl": self.url,
            "hashAlgorithm": "SHA2_256",
            "publicKey": {"rawBytes": b64(spki(key)), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": valid},
            "logId": {"keyId": b64(key_id)},
        }
        der = lambda c: {"rawBytes": b64(c.public_bytes(serialization.Encoding.DER))}
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(self.rekor_key, self.rekor_id)],
            "certificateAuthorities": [
                {
                    "subject": {"organization": "kbuild-standin", "commonName": "kbuild stand-in"},
                    "uri": self.url,
                    "certChain": {"certificates": [der(self.inter), der(self.root)]},
                    "validFor": valid,
                }
            ],
            "ctlogs": [log(self.ct_key, self.ct_id)],
            "timestampAuthorities": [],
        }

    def signing_config(self) -> dict:
        service = lambda: {
            "url": self.url,
            "majorApiVersion": 1,
            "validFor": {"start": "2020-01-01T00:00:00Z"},
            "operator": "kbuild-standin",
        }
        return {
            "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
            "caUrls": [service()],
            "oidcUrls": [],
            "rekorTlogUrls": [service()],
            "tsaUrls": [],
            "rekorTlogConfig": {"selector": "ANY"},
            "tsaConfig": {"selector": "ANY"},
        }


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def handler(instance: Instance):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("standin: " + fmt % args + "\n")

        def answer(self, status: int, value) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/token":
                return self.answer(404, {"message": f"no {url.path}"})
            if self.headers.get("Authorization") != f"Bearer {instance.request_bearer}":
                return self.answer(401, {"message": "bad request bearer"})
            query = dict(urllib.parse.parse_qsl(url.query))
            self.answer(200, {"value": instance.token(query)})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            routes = {
                "/api/v2/signingCert": (instance.signing_cert, 201),
                "/api/v1/log/entries": (instance.log_entry, 201),
            }
            route = routes.get(urllib.parse.urlsplit(self.path).path)
            if route is None:
                return self.answer(404, {"message": f"no {self.path}"})
            auth = self.headers.get("Authorization", "")
            bearer = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            try:
                self.answer(route[1], route[0](request, bearer))
            except Refused as refused:
                self.answer(refused.status, {"code": refused.status, "message": str(refused)})
            except (KeyError, ValueError, TypeError) as e:
                self.answer(400, {"code": 400, "message": f"malformed request: {e!r}"})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="where trust_config.json is written")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), None)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    instance = Instance(url)
    server.RequestHandlerClass = handler(instance)
    trust_config = {
        "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
        "trustedRoot": instance.trusted_root(),
        "signingConfig": instance.signing_config(),
    }
    with open(os.path.join(args.dir, "trust_config.json"), "w") as f:
        json.dump(trust_config, f, indent=2)
    with open(os.path.join(args.dir, "trusted_root.json"), "w") as f:
        json.dump(instance.trusted_root(), f, indent=2)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"ready {url} {instance.request_bearer}", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
