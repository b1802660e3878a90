"""Self-signed CA + serving certificate for the webhook (benchmarks, e2e, local runs).

In a cluster, use cert-manager or an existing Secret (see docs/webhook.md); this is for everywhere else.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class CertFiles:
    ca: str
    cert: str
    key: str

    def ca_pem(self) -> bytes:
        with open(self.ca, "rb") as fh:
            return fh.read()


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def write_certs(directory: str, dns_names: tuple[str, ...] = ("localhost",),
                ips: tuple[str, ...] = ("127.0.0.1",), days: int = 30) -> CertFiles:
    """Write ca.crt, tls.crt, tls.key (EC P-256: fast handshakes) into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("atoll-webhook-ca")).issuer_name(_name("atoll-webhook-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (x509.CertificateBuilder().subject_name(_name(dns_names[0] if dns_names else "atoll-webhook"))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = CertFiles(os.path.join(directory, "ca.crt"), os.path.join(directory, "tls.crt"),
                      os.path.join(directory, "tls.key"))
    with open(files.ca, "wb") as fh:
        fh.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(files.cert, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(files.key, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    os.chmod(files.key, 0o600)
    return files
