"""An in-process Kubernetes API stand-in for the HyperPod operator's custom objects and the built-in kinds the
refresh and the exporter read (DaemonSets, pods, nodes) and the Secrets the Hub token sync fills.

HTTPS on 127.0.0.1 with its own CA (the client must verify it, as with a real EKS endpoint).
Follows the API server's rules the refresh Lambda relies on: bearer token required (an EKS
``k8s-aws-v1.`` token presigned for the right cluster), 404 for a missing object, lists (GET of a
collection: the operator's objects and pods in a namespace, nodes cluster-wide), 415 for a PATCH
that is not ``application/merge-patch+json``, 409 when a patch's ``metadata.resourceVersion`` is not
the stored one, RFC 7386 merge-patch semantics, and a new resourceVersion on every write (a spec change also
raises ``metadata.generation``), and a node list honours ``labelSelector`` equalities. Nothing is created or
deleted through it (neither the refresh nor the exporter may: their RBAC allows neither) but a pod, as the Hub
token sync restarts one: DELETE honours a ``DeleteOptions`` uid precondition (409 otherwise) and, as for a graceful
deletion, answers 200 and keeps the pod listed with ``metadata.deletionTimestamp`` (kubelet removes it later;
``finish_deletions`` plays that). The pod proxy
(``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy<path>``) serves the pages in ``pod_pages``, and 503
(the API server's answer when it cannot reach the pod) for any other.
"""

from __future__ import annotations

import base64
import copy
import datetime
import ipaddress
import json
import re
import ssl
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_PATH = re.compile(r"^/(?:apis/(?:inference\.sagemaker\.aws\.amazon\.com|apps)/v1|api/v1)/namespaces/([^/]+)/([^/]+)/([^/]+)$")
_NODE = re.compile(r"^/api/v1/nodes/([^/?]+)$")
_PROXY = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/:]+):(\d+)/proxy(/.*)$")
_LIST = re.compile(r"^(?:/apis/inference\.sagemaker\.aws\.amazon\.com/v1|/apis/apps/v1|/api/v1)"
                   r"(?:/namespaces/([^/]+))?/([a-z]+)"
                   r"(?:\?labelSelector=([^&]*)|\?fieldSelector=spec\.nodeName%3D([^&]*))?$")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _certificates() -> tuple[bytes, bytes, bytes]:
    """(CA PEM, server cert PEM, server key PEM) for 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-kube-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return (ca.public_bytes(pem), cert.public_bytes(pem),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def token_cluster(header: str | None) -> str | None:
    """The cluster an EKS bearer token was presigned for, or None if it is not one."""
    if not header or not header.startswith("Bearer k8s-aws-v1."):
        return None
    raw = header.removeprefix("Bearer k8s-aws-v1.")
    url = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
    parsed = urllib.parse.urlparse(url)
    query = urllib.parse.parse_qs(parsed.query)
    if not (parsed.hostname or "").startswith("sts.") or query.get("Action") != ["GetCallerIdentity"]:
        return None
    if "x-k8s-aws-id" not in query.get("X-Amz-SignedHeaders", [""])[0].split(";"):
        return None
    return query.get("x-k8s-aws-id", [None])[0] or "signed-header"


class FakeKube:
    def __init__(self, cluster: str = "hyperwarm-test") -> None:
        self.cluster = cluster
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_next: dict[str, int] = {}   # name -> HTTP status of its next PATCH or DELETE
        self.race_next: set[str] = set()      # names changed by "someone else" right before their next PATCH
        self.pod_pages: dict[tuple[str, str, int, str], tuple[int, str]] = {}  # (ns, pod, port, path) -> page
        self.proxied: list[str] = []          # paths of pod-proxy GETs, in order
        self.proxy_delay = 0.0                # seconds each pod-proxy GET takes (so scrapes overlap)
        self.tokens: set[str] = set()         # service-account tokens accepted besides EKS tokens (in-cluster pods)
        self.deleted: list[tuple[str, str]] = []  # (namespace, pod) of each pod deleted, in order
        self._rv = 100
        self._lock = threading.Lock()
        self.ca_pem, cert, key = _certificates()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.NamedTemporaryFile() as c, tempfile.NamedTemporaryFile() as k:
            c.write(cert)
            c.flush()
            k.write(key)
            k.flush()
            context.load_cert_chain(c.name, k.name)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def add(self, obj: dict[str, Any]) -> None:
        plural = obj["kind"].lower() + "s"
        meta = obj["metadata"]
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = self._next_rv()
        stored["metadata"].setdefault("generation", 1)
        stored["metadata"].setdefault("uid", f"uid-{self._rv}")
        self.objects[(plural, meta.get("namespace", ""), meta["name"])] = stored

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.objects[(kind.lower() + "s", namespace, name)]

    def finish_deletions(self) -> None:
        """What kubelet does once a deleted pod's containers are stopped: the pod leaves the API."""
        with self._lock:
            for key in [k for k, o in self.objects.items() if k[0] == "pods" and o["metadata"].get("deletionTimestamp")]:
                del self.objects[key]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        kube = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "reason": reason, "message": message, "code": code})

            def _authorized(self) -> bool:
                header = self.headers.get("Authorization") or ""
                return token_cluster(header) in (kube.cluster, "signed-header") or \
                    header.removeprefix("Bearer ") in kube.tokens

            def _route(self) -> tuple[str, str, str] | None:
                if not self._authorized():
                    self._status(401, "Unauthorized", "Unauthorized")
                    return None
                node = _NODE.match(self.path)
                match = _PATH.match(self.path)
                if node:
                    ns, plural, name = "", "nodes", node.group(1)
                elif match:
                    ns, plural, name = match.groups()
                else:
                    self._status(404, "NotFound", f"no route {self.path}")
                    return None
                if (plural, ns, name) not in kube.objects:
                    self._status(404, "NotFound", f'{plural} "{name}" not found')
                    return None
                return plural, ns, name

            def _proxy(self, ns: str, pod: str, port: str, path: str) -> None:
                if not self._authorized():
                    self._status(401, "Unauthorized", "Unauthorized")
                    return
                kube.proxied.append(self.path)
                time.sleep(kube.proxy_delay)
                status, text = kube.pod_pages.get((ns, pod, int(port), path), (503, "error trying to reach service"))
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                proxied = _PROXY.match(self.path)
                if proxied:
                    self._proxy(*proxied.groups())
                    return
                listed = _LIST.match(self.path)
                if listed:
                    if not self._authorized():
                        self._status(401, "Unauthorized", "Unauthorized")
                        return
                    ns, plural, selector, on_node = listed.groups()
                    wanted = dict(pair.split("=", 1) for pair in urllib.parse.unquote(selector or "").split(",") if pair)
                    with kube._lock:
                        items = [o for (p, n, _), o in sorted(kube.objects.items())
                                 if p == plural and (ns is None or n == ns)
                                 and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
                                 and (on_node is None or (o.get("spec") or {}).get("nodeName") == on_node)]
                        self._send(200, {"kind": "List", "apiVersion": "v1", "items": items})
                    return
                key = self._route()
                if key:
                    with kube._lock:
                        self._send(200, kube.objects[key])

            def do_DELETE(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                key = self._route()
                if not key:
                    return
                if key[0] != "pods":
                    self._status(405, "MethodNotAllowed", f"the stand-in deletes pods only, not {key[0]}")
                    return
                with kube._lock:
                    if key[2] in kube.fail_next:
                        code = kube.fail_next.pop(key[2])
                        self._status(code, "InternalError" if code >= 500 else "Forbidden", "injected failure")
                        return
                    uid = (body.get("preconditions") or {}).get("uid")
                    if uid is not None and uid != kube.objects[key]["metadata"].get("uid"):
                        self._status(409, "Conflict", "Precondition failed: UID in precondition: "
                                                      f"{uid}, UID in object meta: {kube.objects[key]['metadata'].get('uid')}")
                        return
                    pod = kube.objects[key]
                    if not pod["metadata"].get("deletionTimestamp"):
                        pod["metadata"]["deletionTimestamp"] = datetime.datetime.now(datetime.UTC).strftime(
                            "%Y-%m-%dT%H:%M:%SZ")
                        pod["metadata"]["resourceVersion"] = kube._next_rv()
                        kube.deleted.append((key[1], key[2]))
                    self._send(200, pod)

            def do_PATCH(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                key = self._route()
                if not key:
                    return
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    self._status(415, "UnsupportedMediaType", "expected application/merge-patch+json")
                    return
                name = key[2]
                with kube._lock:
                    if name in kube.fail_next:
                        code = kube.fail_next.pop(name)
                        self._status(code, "InternalError" if code >= 500 else "Forbidden", "injected failure")
                        return
                    stored = kube.objects[key]
                    if name in kube.race_next:
                        kube.race_next.discard(name)
                        stored["metadata"]["resourceVersion"] = kube._next_rv()
                    patch = json.loads(body)
                    wanted = patch.get("metadata", {}).get("resourceVersion")
                    if wanted is not None and wanted != stored["metadata"]["resourceVersion"]:
                        self._status(409, "Conflict", "the object has been modified; please apply your changes "
                                                      "to the latest version and try again")
                        return
                    updated = merge_patch(stored, patch)
                    updated["metadata"]["resourceVersion"] = kube._next_rv()
                    if updated.get("spec") != stored.get("spec"):
                        updated["metadata"]["generation"] = int(stored["metadata"].get("generation", 1)) + 1
                    kube.objects[key] = updated
                    kube.patches.append((key[1], name, patch))
                    self._send(200, updated)

        return Handler
