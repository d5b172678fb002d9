"""Certificates made per run for a TLS cluster of the reference node (`--node-config security=ssl`).

One throwaway CA per run signs a certificate for each node and one for the harness's clients; the
CA's private key never leaves this process. Each node certificate names, as subject alternative
names, every address by which a peer or a client dials that node (container names, loopback or
container IPs), so that Kafka's default `ssl.endpoint.identification.algorithm=https` holds. Every
certificate may serve both ends of a connection (server and client authentication), since a
controller dials its peers with the certificate it serves.

The files are PEM, as the node reads them (`reference_node/wire/tls.py`): `ca.pem` (the trust
store) and, per holder, one file with its PKCS#8 private key and its certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from reference_node.wire import tls

VALIDITY = datetime.timedelta(days=7)
CLOCK_SKEW = datetime.timedelta(hours=1)  # node clocks (containers) may lag the harness's a bit
CA_FILE = "ca.pem"
CLIENT_FILE = "client.pem"


class CertificateAuthority:
    """A CA that exists for one run (EC P-256: fast to make, and Kafka's PEM store reads it)."""

    def __init__(self, name: str = "kraft-jepsen run CA") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name)
        now = _now()
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()),
                           critical=False)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        """The trust store's content: this CA's certificate."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, hosts: Iterable[str] = ()) -> bytes:
        """A key store's content: a new PKCS#8 private key and its certificate, signed by us,
        naming `hosts` (IP addresses or DNS names) as subject alternative names."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self._key.public_key()), critical=False)
        )
        names = _alt_names(hosts)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()) \
            + certificate.public_bytes(serialization.Encoding.PEM)


class RunTls:
    """A run's CA, with the harness's own files (trust store and client key store) in `local_dir`."""

    def __init__(self, local_dir: Path) -> None:
        self.ca = CertificateAuthority()
        self.dir = local_dir
        local_dir.mkdir(parents=True, exist_ok=True)
        (local_dir / CA_FILE).write_bytes(self.ca.pem)
        client = local_dir / CLIENT_FILE
        client.touch(mode=0o600)
        client.write_bytes(self.ca.issue("kraft-harness"))

    def client_settings(self, verify_hostname: bool = True) -> tls.TlsSettings:
        return tls.TlsSettings(keystore=str(self.dir / CLIENT_FILE),
                               truststore=str(self.dir / CA_FILE),
                               verify_hostname=verify_hostname)

    def client_context(self, verify_hostname: bool = True) -> ssl.SSLContext:
        """How the harness's clients dial the nodes: with a certificate of this run's CA."""
        return tls.client_context(self.client_settings(verify_hostname))

    def node_files(self, name: str, hosts: Iterable[str]) -> dict[str, bytes]:
        """What node `name` needs, by file name: the trust store and its key store."""
        return {CA_FILE: self.ca.pem, "node.pem": self.ca.issue(name, hosts)}


def node_settings(directory: str, client_auth: str = "required") -> dict[str, str]:
    """The node keys (Kafka's names) of an SSL controller listener using `node_files` in
    `directory` on the node's host."""
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": f"{directory}/node.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": f"{directory}/{CA_FILE}",
        "ssl.client.auth": client_auth,
        "ssl.endpoint.identification.algorithm": "https",
    }


def _alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            names.append(x509.DNSName(host))
            continue
        if not ip.is_unspecified:  # 0.0.0.0 is where one listens, never whom one dials
            names.append(x509.IPAddress(ip))
    return names


def _key_usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=not ca, content_commitment=False,
                         key_encipherment=False, data_encipherment=False,
                         key_agreement=not ca, key_cert_sign=ca, crl_sign=ca,
                         encipher_only=False, decipher_only=False)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
