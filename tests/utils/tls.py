"""A throwaway certificate authority for TLS tests: a server certificate for given DNS names, its CA file
for clients (`SSL_CERT_FILE`), and a server context that records the SNI names clients sent.
"""

from __future__ import annotations

import datetime as dt
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass
class ThrowawayCA:
    directory: Path
    sni_seen: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        now = dt.datetime.now(dt.UTC)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("report-orchestrator test CA"))
            .issuer_name(_name("report-orchestrator test CA"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca_file = self.directory / "ca.pem"
        self.ca_file.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def server_context(self, *dns_names: str) -> ssl.SSLContext:
        """A server context presenting a certificate for `dns_names`, signed by this CA."""
        now = dt.datetime.now(dt.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(dns_names[0]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        stem = self.directory / dns_names[0]
        stem.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        stem.with_suffix(".key").write_bytes(_pem_key(key))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(stem.with_suffix(".crt"), stem.with_suffix(".key"))
        context.sni_callback = lambda _sock, name, _ctx: self.sni_seen.append(name)
        return context
