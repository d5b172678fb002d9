"""TLS for the Kafka protocol, from PEM files as Kafka reads them with `ssl.keystore.type=PEM`.

The subset of Kafka's SSL settings this project speaks, the same on the node, in `kraft quorum
--command-config` and in the harness's client:

- `ssl.keystore.location`: one PEM file holding the private key (PKCS#8, `BEGIN PRIVATE KEY`, or
  `BEGIN ENCRYPTED PRIVATE KEY` with `ssl.key.password`) and the certificate chain, leaf first,
  as Kafka's PEM key store; `ssl.keystore.type` and `ssl.truststore.type` accept only `PEM`.
- `ssl.truststore.location`: PEM CA certificates. Without it the system's CAs are trusted, as the
  JVM's default trust store is in Kafka.
- `ssl.client.auth` (server side): `required`, `requested` (a certificate is checked if one is
  sent) or `none` (Kafka's default).
- `ssl.endpoint.identification.algorithm` (client side): `https` (Kafka's default) checks that
  the server's certificate names the host dialled (a SAN, DNS name or IP address); empty turns
  the check off. The server's certificate is always checked against the trust store.

Kafka's inline forms (`ssl.keystore.key`, `ssl.keystore.certificate.chain`,
`ssl.truststore.certificates`), JKS/PKCS12 stores and SASL are not supported. Only the standard
library's `ssl` is used: the node's image carries no other crypto package.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
               "none": ssl.CERT_NONE}
PROTOCOLS = ("PLAINTEXT", "SSL")
STORE_TYPES = ("PEM",)
KEYSTORE_ACCEPTED = "a readable PEM file with a PKCS#8 private key and its certificate chain"
TRUSTSTORE_ACCEPTED = "a readable PEM file of CA certificates"


class TlsError(ValueError):
    """A key or trust store that cannot be used; names the setting and the file."""

    def __init__(self, key: str, path: str, problem: str, accepted: str) -> None:
        super().__init__(f"{key}={path}: {problem}")
        self.key = key
        self.path = path
        self.problem = problem
        self.accepted = accepted


@dataclass(frozen=True, slots=True)
class TlsSettings:
    keystore: str | None = None
    """ssl.keystore.location: this side's private key and certificate chain (PEM)."""
    key_password: str | None = field(default=None, repr=False)
    """ssl.key.password: decrypts an encrypted private key."""
    truststore: str | None = None
    """ssl.truststore.location: the CAs whose certificates this side accepts (PEM)."""
    client_auth: str = "none"
    """ssl.client.auth, for a server: required | requested | none."""
    verify_hostname: bool = True
    """ssl.endpoint.identification.algorithm=https, for a client."""


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: our certificate, and the client check `ssl.client.auth` asks."""
    if settings.keystore is None:
        raise TlsError("ssl.keystore.location", "", "missing: a TLS listener needs a certificate",
                       KEYSTORE_ACCEPTED)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, settings)
    _load_truststore(context, settings, ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A dialling side's context: the server is always verified; our certificate if we have one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = settings.verify_hostname
    if settings.keystore is not None:
        _load_keystore(context, settings)
    _load_truststore(context, settings, ssl.Purpose.SERVER_AUTH)
    return context


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    path = settings.keystore
    assert path is not None
    _readable("ssl.keystore.location", path, KEYSTORE_ACCEPTED)
    try:
        context.load_cert_chain(path, password=settings.key_password or _no_password)
    except ssl.SSLError as exc:
        raise TlsError("ssl.keystore.location", path,
                       f"not a usable key and certificate chain ({_reason(exc)})",
                       KEYSTORE_ACCEPTED) from None


def _no_password() -> str:
    # Without this, OpenSSL would prompt on the terminal for an encrypted key's password.
    raise TlsError("ssl.key.password", "", "missing: the private key is encrypted",
                   "the password of the private key in ssl.keystore.location")


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings,
                     purpose: ssl.Purpose) -> None:
    path = settings.truststore
    if path is None:
        context.load_default_certs(purpose)
        return
    _readable("ssl.truststore.location", path, TRUSTSTORE_ACCEPTED)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise TlsError("ssl.truststore.location", path,
                       f"no CA certificate in it ({_reason(exc)})", TRUSTSTORE_ACCEPTED) from None


def _readable(key: str, path: str, accepted: str) -> None:
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise TlsError(key, path, f"cannot read it: {exc.strerror or exc}", accepted) from None
    if b"-----BEGIN " not in text:
        raise TlsError(key, path, "not a PEM file (no -----BEGIN line)", accepted)


def _reason(exc: ssl.SSLError) -> str:
    if exc.reason:
        return str(exc.reason)
    return str(exc.args[-1]) if exc.args else str(exc)


# --- client settings from Kafka client properties (kraft quorum --command-config) ----------

CLIENT_KEYS = ("security.protocol", "ssl.keystore.type", "ssl.keystore.location",
               "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
               "ssl.endpoint.identification.algorithm")


def client_settings(props: dict[str, str]) -> TlsSettings | None:
    """The TLS settings of Kafka client properties, or None for `security.protocol=PLAINTEXT`.

    ValueError naming the key on an unknown key or a bad value."""
    for key in props:
        if key not in CLIENT_KEYS:
            raise ValueError(f"{key}: unknown or unsupported; the keys read are "
                             f"{', '.join(CLIENT_KEYS)}")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol: {protocol!r} is not supported; one of "
                         f"{' | '.join(PROTOCOLS)}")
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if props.get(key, "PEM").strip().upper() not in STORE_TYPES:
            raise ValueError(f"{key}: only PEM is supported")
    if protocol == "PLAINTEXT":
        return None
    return TlsSettings(
        keystore=_path(props.get("ssl.keystore.location")),
        key_password=props.get("ssl.key.password") or None,
        truststore=_path(props.get("ssl.truststore.location")),
        verify_hostname=endpoint_identification(
            props.get("ssl.endpoint.identification.algorithm", "https")),
    )


def endpoint_identification(value: str) -> bool:
    """Whether `ssl.endpoint.identification.algorithm` asks for hostname verification."""
    value = value.strip().lower()
    if value not in ("https", ""):
        raise ValueError("ssl.endpoint.identification.algorithm: https or empty (no check)")
    return value == "https"


def _path(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None
