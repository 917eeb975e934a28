"""A real HTTP front for moto's S3 server that refuses presigned links the way S3 does, which moto never
does: a query-signed request is verified with the test's credentials, then refused once it has expired."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

import httpx

from tests.utils.object_store import ACCESS_KEY_ID, SECRET_ACCESS_KEY

ALGORITHM = "AWS4-HMAC-SHA256"
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
MAX_EXPIRES_S = 7 * 24 * 3600  # S3's limit for a SigV4 presigned URL
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)


class Refusal(Exception):
    """An S3 error answer: status, code, message and the extra elements of its <Error> document."""

    def __init__(self, status: int, code: str, message: str, **extra: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def xml(self) -> bytes:
        elements = {"Code": self.code, "Message": self.message, **self.extra}
        elements.update(RequestId=uuid.uuid4().hex[:16].upper(), HostId="presign-gate")
        body = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in elements.items())
        return f'<?xml version="1.0" encoding="UTF-8"?>\n<Error>{body}</Error>'.encode()


def _uri_encode(value: str, safe: str = "") -> str:
    # SigV4's encoding: everything but A-Z a-z 0-9 - _ . ~ is percent-encoded (and "/" in a path).
    return quote(value, safe=safe + "~")


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def sigv4_query_signature(
    secret_key: str, method: str, path: str, query: list[tuple[str, str]], headers: Mapping[str, str]
) -> str:
    """The signature S3 expects for a query-signed request (`query` decoded, `X-Amz-Signature` left out)."""
    params = dict(query)
    signed_headers = params["X-Amz-SignedHeaders"].split(";")
    canonical_query = "&".join(
        f"{_uri_encode(k)}={_uri_encode(v)}" for k, v in sorted(query) if k != "X-Amz-Signature"
    )
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed_headers)
    canonical_request = "\n".join(
        [
            method,
            _uri_encode(unquote(path), safe="/"),
            canonical_query,
            canonical_headers,
            ";".join(signed_headers),
            params.get("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"),
        ]
    )
    _, date, region, service, terminator = params["X-Amz-Credential"].split("/")
    scope = f"{date}/{region}/{service}/{terminator}"
    string_to_sign = "\n".join(
        [ALGORITHM, params["X-Amz-Date"], scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = _hmac(f"AWS4{secret_key}".encode(), date)
    for part in (region, service, terminator):
        key = _hmac(key, part)
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def check_presigned(
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: Mapping[str, str],
    secrets: Mapping[str, str],
    now: float,
) -> None:
    """Raise the Refusal S3 would answer a query-signed request with; return when it is valid at `now`."""
    params = dict(query)
    required = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders")
    if params.get("X-Amz-Algorithm") != ALGORITHM or any(name not in params for name in required):
        raise Refusal(
            400,
            "AuthorizationQueryParametersError",
            "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
            "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
        )
    expires_text = params["X-Amz-Expires"]
    if not expires_text.isdigit():
        raise Refusal(400, "AuthorizationQueryParametersError", "X-Amz-Expires should be a number")
    expires_s = int(expires_text)
    if expires_s > MAX_EXPIRES_S:
        raise Refusal(
            400,
            "AuthorizationQueryParametersError",
            f"X-Amz-Expires must be less than a week (in seconds) that is; {MAX_EXPIRES_S}",
        )
    try:
        signed_at = datetime.strptime(params["X-Amz-Date"], AMZ_DATE_FORMAT).replace(tzinfo=UTC)
        access_key = params["X-Amz-Credential"].split("/")[0]
        lower_headers = {name.lower(): value for name, value in headers.items()}
        if access_key not in secrets:
            raise Refusal(
                403,
                "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records.",
                AWSAccessKeyId=access_key,
            )
        expected = sigv4_query_signature(secrets[access_key], method, path, query, lower_headers)
    except (ValueError, KeyError) as exc:
        raise Refusal(
            400, "AuthorizationQueryParametersError", f"Malformed presigned request: {exc}"
        ) from exc
    if not hmac.compare_digest(expected, params["X-Amz-Signature"]):
        raise Refusal(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
            AWSAccessKeyId=access_key,
        )
    expires_at = signed_at + timedelta(seconds=expires_s)
    server_time = datetime.fromtimestamp(now, UTC)
    if server_time > expires_at:
        raise Refusal(
            403,
            "AccessDenied",
            "Request has expired",
            **{
                "X-Amz-Expires": str(expires_s),
                "Expires": expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "ServerTime": server_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        )


class PresignGate:
    """The front, `start()`ed on a free port of 127.0.0.1 (its own thread) before `upstream` (moto).

    moto 5 authenticates only requests with an `Authorization` header, and only with its IAM checks on; a
    presigned URL (`X-Amz-Signature` in the query) is served whatever its `X-Amz-Date` and `X-Amz-Expires`.
    For such a request the gate recomputes the AWS4-HMAC-SHA256 signature (the signed headers, the query
    without `X-Amz-Signature`, `UNSIGNED-PAYLOAD`) with the secret of the access key in `X-Amz-Credential`,
    so a link whose `X-Amz-Expires` was edited is a 403 `SignatureDoesNotMatch`; then, past `X-Amz-Date` +
    `X-Amz-Expires` by `clock`, a 403 `AccessDenied` "Request has expired" with S3's `X-Amz-Expires`,
    `Expires` and `ServerTime` elements. Everything else is forwarded to moto unchanged. Point the storage
    client at `endpoint` (`OUTPUT_S3_ENDPOINT_URL`) so it signs its links for the gate's host.
    """

    def __init__(
        self,
        upstream: str,
        secrets: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.secrets = dict(secrets or {ACCESS_KEY_ID: SECRET_ACCESS_KEY})
        self.clock = clock
        self.refusals: list[Refusal] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # No kept-alive connections to moto: a test may restart it on the same port.
        self._http = httpx.Client(
            trust_env=False, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
        )

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() the gate first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> PresignGate:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="presign-gate", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._http.close()

    def answer(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Check (when query-signed) and forward one request; the status, headers and body to send back."""
        split = urlsplit(target)
        query = parse_qsl(split.query, keep_blank_values=True)
        if any(name == "X-Amz-Signature" for name, _ in query):
            try:
                check_presigned(method, split.path, query, headers, self.secrets, self.clock())
            except Refusal as refusal:
                self.refusals.append(refusal)
                return refusal.status, [("Content-Type", "application/xml")], refusal.xml()
        forwarded = [(k, v) for k, v in headers.items() if k.lower() not in HOP_BY_HOP | {"host"}]
        forwarded = [(k, v) for k, v in forwarded if k.lower() != "content-length"]
        try:
            upstream = self._http.request(
                method, f"{self.upstream}{target}", headers=forwarded, content=body or None
            )
        except httpx.HTTPError as exc:
            refusal = Refusal(503, "ServiceUnavailable", f"The store behind the gate is unreachable: {exc}")
            return refusal.status, [("Content-Type", "application/xml")], refusal.xml()
        kept = [
            (k, v)
            for k, v in upstream.headers.multi_items()
            if k.lower() not in HOP_BY_HOP | {"content-length", "server", "date"}
        ]
        if method == "HEAD":
            kept += [("Content-Length", upstream.headers.get("content-length", "0"))]
            return upstream.status_code, kept, b""
        return upstream.status_code, kept, upstream.content

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect

            def _serve(self) -> None:
                body = self._read_body()
                status, headers, content = gate.answer(self.command, self.path, dict(self.headers), body)
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(content)

            def _read_body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
