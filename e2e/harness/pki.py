"""Certificates, keys and token files for the fleet, generated with `cryptography`.

One CA signs everything. A single serving certificate covers every TLS endpoint on
127.0.0.1 (apiservers, aggregated apiserver, karmada-webhook) and the in-cluster DNS names
the host apiserver uses to verify an aggregated apiserver (``<svc>.<ns>.svc``). Clients
authenticate with one static admin bearer token (``--token-auth-file``), which is also the
token Karmada uses to reach members (Cluster secretRef). Later tests that run their own
HTTPS webhook on 127.0.0.1 can use ``issue_serving_cert`` with the same CA.
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVING_DNS_NAMES = [
    "localhost",
    "kubernetes", "kubernetes.default", "kubernetes.default.svc",
    "karmada-apiserver", "karmada-apiserver.karmada-system.svc",
    "karmada-aggregated-apiserver.karmada-system.svc",
    "karmada-webhook.karmada-system.svc",
]


@dataclass(frozen=True)
class Pki:
    """Paths of the generated material inside ``<state>/pki``."""

    dir: Path

    @property
    def ca_crt(self) -> Path: return self.dir / "ca.crt"
    @property
    def ca_key(self) -> Path: return self.dir / "ca.key"
    @property
    def serving_crt(self) -> Path: return self.dir / "serving.crt"
    @property
    def serving_key(self) -> Path: return self.dir / "serving.key"
    @property
    def client_crt(self) -> Path: return self.dir / "admin-client.crt"
    @property
    def client_key(self) -> Path: return self.dir / "admin-client.key"
    @property
    def sa_key(self) -> Path: return self.dir / "sa.key"
    @property
    def sa_pub(self) -> Path: return self.dir / "sa.pub"
    @property
    def token_file(self) -> Path: return self.dir / "tokens.csv"
    @property
    def token_path(self) -> Path: return self.dir / "admin.token"

    def token(self) -> str:
        return self.token_path.read_text().strip()

    def ca_pem(self) -> bytes:
        return self.ca_crt.read_bytes()


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load_ca(pki: Pki) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def _sign(pki: Pki, cn: str, orgs: list[str], dns: list[str], ips: list[str],
          usage: list[x509.ObjectIdentifier]) -> tuple[bytes, bytes]:
    ca_cert, ca_key = _load_ca(pki)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]
                     + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, content_commitment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usage), critical=False))
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving_cert(pki: Pki, out_dir: Path, name: str, dns: list[str] | None = None,
                       ips: list[str] | None = None) -> tuple[Path, Path]:
    """Sign a serving cert for a test's own HTTPS server (e.g. a webhook on 127.0.0.1)."""
    crt, key = _sign(pki, name, [], dns or ["localhost"], ips or ["127.0.0.1"], [ExtendedKeyUsageOID.SERVER_AUTH])
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(out_dir / f"{name}.crt", crt)
    _write(out_dir / f"{name}.key", key, private=True)
    return out_dir / f"{name}.crt", out_dir / f"{name}.key"


def ensure_pki(directory: Path) -> Pki:
    """Create the CA, certs, service-account key and token file once; reuse them afterwards."""
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if pki.token_file.exists() and pki.serving_crt.exists() and pki.client_crt.exists() and pki.sa_pub.exists():
        return pki
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "atoll-e2e-ca")])
    ca = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    _write(pki.ca_crt, ca.public_bytes(serialization.Encoding.PEM))
    _write(pki.ca_key, _key_pem(ca_key), private=True)
    crt, key = _sign(pki, "atoll-e2e-serving", [], SERVING_DNS_NAMES, ["127.0.0.1", "::1"],
                     [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    _write(pki.serving_crt, crt)
    _write(pki.serving_key, key, private=True)
    # Client cert: front-proxy client of the host apiserver (aggregation) and a cert-based admin.
    crt, key = _sign(pki, "front-proxy-client", ["system:masters"], [], [], [ExtendedKeyUsageOID.CLIENT_AUTH])
    _write(pki.client_crt, crt)
    _write(pki.client_key, key, private=True)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(pki.sa_key, _key_pem(sa), private=True)
    _write(pki.sa_pub, sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo))
    token = secrets.token_hex(24)
    _write(pki.token_path, token.encode() + b"\n", private=True)
    _write(pki.token_file, f'{token},atoll-e2e-admin,atoll-e2e-admin,"system:masters"\n'.encode(), private=True)
    return pki
