"""Certificates and keys for a throwaway local control plane.

kube-apiserver authenticates users by client certificate (CN = user, O = groups), which lets
tests act as any identity, e.g. the operator's ServiceAccount, and see RBAC enforced, without
a token controller (none runs here). Everything is signed by one local CA whose key stays in
the control plane's directory, so any process can mint a new user later.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for any test session or local debugging; the CA never leaves the machine.
_VALIDITY = datetime.timedelta(days=365)
# Tolerate small clock differences between whoever signs and the apiserver checking.
_BACKDATE = datetime.timedelta(minutes=5)

SERVING_DNS_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
# 127.0.0.1 is where clients connect; 10.0.0.1 is the `kubernetes` Service's ClusterIP in
# --service-cluster-ip-range=10.0.0.0/24, which the apiserver may advertise.
SERVING_IPS = ("127.0.0.1", "10.0.0.1")


@dataclass(frozen=True)
class PkiPaths:
    """Files in `<dir>/pki` that the apiserver flags point at."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "sa.pub"


@dataclass(frozen=True)
class ClientCredentials:
    """PEM bytes for a certificate (a client's, or a kubelet's serving one) and its key."""

    cert_pem: bytes
    key_pem: bytes


def ensure_pki(paths: PkiPaths, *, node_ips: Sequence[str] = ()) -> None:
    """Create the CA, the serving certificate and the service-account key unless present.

    An existing CA is kept so kubeconfigs minted before a restart stay valid. `node_ips` are
    more addresses the serving certificate names: where pods on real nodes reach the apiserver
    (``relay``). A serving certificate that names other addresses is issued again.
    """
    paths.directory.mkdir(parents=True, exist_ok=True)
    if not (paths.ca_cert.exists() and paths.ca_key.exists()):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabriccap-local-ca")])
        now = _now()
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        write_private(paths.ca_key, _key_pem(ca_key))
        paths.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        # A new CA invalidates the old serving certificate.
        paths.serving_cert.unlink(missing_ok=True)

    serving_ips = [ipaddress.ip_address(ip) for ip in (*SERVING_IPS, *node_ips)]
    if not (paths.serving_cert.exists() and paths.serving_key.exists()) or _ip_sans(paths.serving_cert) != set(
        serving_ips
    ):
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVING_DNS_NAMES]
        sans += [x509.IPAddress(ip) for ip in serving_ips]
        credentials = _issue(
            paths,
            subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
            sans=sans,
        )
        write_private(paths.serving_key, credentials.key_pem)
        paths.serving_cert.write_bytes(credentials.cert_pem)

    if not paths.service_account_key.exists():
        # RSA: RS256 is the one algorithm every token consumer supports.
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        write_private(paths.service_account_key, _key_pem(sa_key))
        paths.service_account_public_key.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def _ip_sans(cert_file: Path) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {
        ip
        for ip in names.get_values_for_type(x509.IPAddress)
        if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address)
    }


def issue_client(paths: PkiPaths, user: str, groups: Sequence[str] = ()) -> ClientCredentials:
    """A client certificate the apiserver maps to `user` in `groups`."""
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    return _issue(paths, subject=x509.Name(attributes), usage=ExtendedKeyUsageOID.CLIENT_AUTH, sans=[])


def issue_serving(
    paths: PkiPaths, common_name: str, *, dns_names: Sequence[str] = (), ips: Sequence[str] = ()
) -> ClientCredentials:
    """A serving certificate for `dns_names` and `ips` (a kubelet's: the apiserver verifies it
    when it dials the node for `kubectl logs/exec`)."""
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    return _issue(
        paths,
        subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=sans,
    )


def _issue(
    paths: PkiPaths, *, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
) -> ClientCredentials:
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{paths.ca_key} is not the EC key this module writes")
    ca_cert = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return ClientCredentials(cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=_key_pem(key))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_private(path: Path, data: bytes) -> None:
    """Write a secret readable by the owner only, from the moment the file exists."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
