"""A publisher's signature of a model version: ``<prefix>/<version>/model.sig``, in the OpenSSF model-signing format.

The file is a Sigstore bundle (``application/vnd.dev.sigstore.bundle.v0.3+json``) holding a DSSE envelope whose
payload is an in-toto Statement v1 with the predicate ``https://model_signing/signature/v1.0`` (OpenSSF
model-signing, github.com/sigstore/model-transparency): one subject, the version (named ``<prefix>/<version>``, so a
signed version copied under another folder or prefix does not verify) with the SHA-256 over its resources' digests
in order; the resources, sorted by name, are every file of the manifest and ``manifest.json`` itself. So the
signature covers the manifest's every field (sizes, checksums) and every file's SHA-256. The envelope's signature
is ECDSA P-256 with SHA-256 over DSSE's pre-authentication encoding (PAE), made by an asymmetric KMS key
(``ECC_NIST_P256``, signing algorithm ``ECDSA_SHA_256``, the digest sent with ``MessageType=DIGEST``), and checked
with ``kms:Verify`` against the one key configured for the prefix. The OpenSSF tool verifies the same file offline
with the key's public half (``model_signing verify key``).

Standard library only: the refresh function verifies, ``hyperwarm publish`` signs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .errors import PermanentError, TransientError

NAME = "model.sig"
"""The signature's key in a version folder (the OpenSSF tool's default file name)."""
MAX_BYTES = 8 * 1024 * 1024
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
SIGNING_ALGORITHM = "ECDSA_SHA_256"
MANIFEST = "manifest.json"
_SERIALIZATION = {"method": "files", "hash_type": "sha256", "allow_symlinks": False, "ignore_paths": [NAME]}
_KMS_TRANSIENT = {"KMSInternalException", "DependencyTimeoutException", "ThrottlingException",
                  "LimitExceededException", "ServiceUnavailableException", "InternalFailure"}


@dataclass(frozen=True)
class Signed:
    """A bundle's DSSE payload (the statement's bytes, as signed) and its signature (DER)."""

    payload: bytes
    signature: bytes

    @property
    def digest(self) -> bytes:
        """SHA-256 of the PAE: what the KMS key signs and verifies (``MessageType=DIGEST``)."""
        return hashlib.sha256(pae(self.payload)).digest()


def subject(prefix: str, version: str) -> str:
    """The statement's subject name for a version: its folder, so a signature belongs to that folder alone."""
    return f"{prefix}/{version}"


def resources(files: Iterable[Any], manifest_sha256: str) -> dict[str, str]:
    """Name -> SHA-256 hex of what a version's signature covers: the manifest's files and ``manifest.json``."""
    return {**{f.path: f.sha256 for f in files}, MANIFEST: manifest_sha256}


def statement(name: str, covered: dict[str, str]) -> bytes:
    """The in-toto statement over ``covered`` (name -> SHA-256 hex), as the OpenSSF model-signing predicate v1.0."""
    ordered = sorted(covered.items())
    doc = {"_type": STATEMENT_TYPE, "subject": [{"name": name, "digest": {"sha256": _root(d for _, d in ordered)}}],
           "predicateType": PREDICATE_TYPE,
           "predicate": {"serialization": _SERIALIZATION,
                         "resources": [{"name": n, "algorithm": "sha256", "digest": d} for n, d in ordered]}}
    return json.dumps(doc, separators=(",", ":")).encode()


def _root(digests: Iterable[str]) -> str:
    """The subject's digest: SHA-256 over the resources' digests in their order (as the format defines it)."""
    return hashlib.sha256(b"".join(bytes.fromhex(d) for d in digests)).hexdigest()


def pae(payload: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding of an in-toto payload (what is signed)."""
    return b" ".join([f"DSSEv1 {len(PAYLOAD_TYPE)} {PAYLOAD_TYPE} {len(payload)}".encode(), payload])


def bundle(signed: Signed, key_hint: str = "") -> bytes:
    """The ``model.sig`` document; ``key_hint`` is the SHA-256 hex of the public key's PEM (the tool checks it)."""
    return json.dumps({
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": key_hint}, "tlogEntries": []},
        "dsseEnvelope": {"payload": base64.b64encode(signed.payload).decode(), "payloadType": PAYLOAD_TYPE,
                         "signatures": [{"sig": base64.b64encode(signed.signature).decode(), "keyid": ""}]},
    }, indent=2).encode()


def read_bundle(body: bytes) -> Signed:
    """The payload and signature of a ``model.sig``; PermanentError ``signature-invalid`` naming what is wrong."""
    try:
        doc = json.loads(body)
        envelope = doc["dsseEnvelope"]
        if doc.get("mediaType") != BUNDLE_MEDIA_TYPE or envelope.get("payloadType") != PAYLOAD_TYPE:
            raise ValueError(f"expected a {BUNDLE_MEDIA_TYPE} bundle with an {PAYLOAD_TYPE} envelope")
        (only,) = envelope["signatures"]
        return Signed(base64.b64decode(envelope["payload"], validate=True), base64.b64decode(only["sig"], validate=True))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, binascii.Error) as exc:
        raise PermanentError("signature-invalid", f"{NAME} is not a model-signing bundle: {exc!r}") from None


def check_statement(signed: Signed, name: str, covered: dict[str, str]) -> None:
    """The signed statement names this version and covers exactly ``covered``; PermanentError
    ``signature-mismatch`` naming the first difference. Call after the signature verified."""
    try:
        doc = json.loads(signed.payload)
        (subj,) = doc["subject"]
        listed = [(r["name"], r["digest"]) for r in doc["predicate"]["resources"] if r["algorithm"] == "sha256"]
        consistent = (doc["_type"] == STATEMENT_TYPE and doc["predicateType"] == PREDICATE_TYPE
                      and len(listed) == len(doc["predicate"]["resources"])
                      and subj["digest"]["sha256"] == _root(d for _, d in listed))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise PermanentError("signature-mismatch", f"the signed statement is not a model-signing v1.0 one: {exc!r}") \
            from None
    if not consistent:
        raise PermanentError("signature-mismatch", "the signed statement is not a consistent model-signing v1.0 one "
                                                   "(types, sha256 resources and the subject's digest over them)")
    if subj.get("name") != name:
        raise PermanentError("signature-mismatch", f"signed for {subj.get('name')!r}, not {name!r}")
    signed_for = dict(listed)
    if signed_for != covered or len(signed_for) != len(listed):
        differ = sorted(set(signed_for) ^ set(covered) | {n for n in set(signed_for) & set(covered)
                                                          if signed_for[n] != covered[n]}) or ["a name listed twice"]
        raise PermanentError("signature-mismatch", f"the signature and the manifest differ in {len(differ)} file(s): "
                                                   f"{', '.join(differ[:5])}")


def verify(kms: Any, key: str, signed: Signed) -> None:
    """``kms:Verify`` of the bundle's signature with the publisher's key; PermanentError ``signature-invalid``
    (not this key's signature) or ``publisher-key-unusable`` (disabled, deleted, not allowed), TransientError when
    KMS cannot answer now."""
    try:
        answer = kms.verify(KeyId=key, Message=signed.digest, MessageType="DIGEST", Signature=signed.signature,
                            SigningAlgorithm=SIGNING_ALGORITHM)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code == "KMSInvalidSignatureException":
            raise PermanentError("signature-invalid", f"{NAME} was not signed by {key}") from None
        if code in _KMS_TRANSIENT:
            raise TransientError("kms-unavailable", f"Verify with {key}: {code}") from None
        raise PermanentError("publisher-key-unusable", f"Verify with {key}: {code}") from None
    if answer.get("SignatureValid") is not True:
        raise PermanentError("signature-invalid", f"{NAME} was not signed by {key}")


def sign(kms: Any, key: str, payload: bytes) -> Signed:
    """``kms:Sign`` of a statement's PAE digest with the publisher's key (``hyperwarm publish``)."""
    digest = hashlib.sha256(pae(payload)).digest()
    answer = kms.sign(KeyId=key, Message=digest, MessageType="DIGEST", SigningAlgorithm=SIGNING_ALGORITHM)
    return Signed(payload, answer["Signature"])
