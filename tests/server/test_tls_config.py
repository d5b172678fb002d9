"""The SSL controller listener's configuration: Kafka's names, PEM stores, and one line per mistake."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from harness.targets.reference_tls import CertificateAuthority
from reference_node.config import ConfigError, from_properties
from reference_node.properties import render
from reference_node.wire import tls

BASE = {
    "node.id": "1",
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "metadata.log.dir": "/tmp/x",
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA's trust store and a node key store it signed, as Kafka's PEM stores."""
    root = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority()
    (root / "ca.pem").write_bytes(ca.pem)
    (root / "node.pem").write_bytes(ca.issue("node1", ["127.0.0.1"]))
    return {"ca": str(root / "ca.pem"), "node": str(root / "node.pem"), "dir": str(root)}


def _ssl(stores: dict[str, str], **extra: str) -> dict[str, str]:
    return {**BASE, "listener.security.protocol.map": "CONTROLLER:SSL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": stores["node"],
            "ssl.truststore.type": "PEM", "ssl.truststore.location": stores["ca"], **extra}


def test_plaintext_stays_the_default() -> None:
    cfg = from_properties(BASE)
    assert cfg.security_protocol("CONTROLLER") == "PLAINTEXT"
    assert cfg.listener_ssl() is None and cfg.peer_ssl() is None


def test_an_ssl_listener_requires_client_certificates_when_asked(stores: dict[str, str]) -> None:
    cfg = from_properties(_ssl(stores, **{"ssl.client.auth": "required"}))
    server = cfg.listener_ssl()
    peer = cfg.peer_ssl()
    assert server is not None and server.verify_mode == ssl.CERT_REQUIRED
    # the node dials its peers over TLS too, checking that their certificate names the host
    assert peer is not None and peer.verify_mode == ssl.CERT_REQUIRED and peer.check_hostname


@pytest.mark.parametrize(("auth", "mode"), [("requested", ssl.CERT_OPTIONAL),
                                            ("none", ssl.CERT_NONE)])
def test_client_auth_values(stores: dict[str, str], auth: str, mode: ssl.VerifyMode) -> None:
    server = from_properties(_ssl(stores, **{"ssl.client.auth": auth})).listener_ssl()
    assert server is not None and server.verify_mode == mode


def test_kafkas_default_client_auth_is_none(stores: dict[str, str]) -> None:
    server = from_properties(_ssl(stores)).listener_ssl()
    assert server is not None and server.verify_mode == ssl.CERT_NONE


def test_empty_endpoint_identification_turns_the_hostname_check_off(
        stores: dict[str, str]) -> None:
    peer = from_properties(_ssl(stores, **{"ssl.endpoint.identification.algorithm": ""})
                           ).peer_ssl()
    assert peer is not None and not peer.check_hostname


def test_a_listener_named_ssl_is_ssl_without_a_map(stores: dict[str, str]) -> None:
    # Kafka's default map sends the SSL listener name to the SSL protocol
    props = {**_ssl(stores), "listeners": "SSL://127.0.0.1:9093", "controller.listener.names": "SSL"}
    del props["listener.security.protocol.map"]
    assert from_properties(props).listener_ssl() is not None
    del props["ssl.keystore.location"]
    with pytest.raises(ConfigError) as err:
        from_properties(props)
    assert err.value.key == "ssl.keystore.location" and "missing" in str(err.value)


def test_missing_keystore_file_names_key_and_path(stores: dict[str, str]) -> None:
    missing = stores["dir"] + "/nope.pem"
    with pytest.raises(ConfigError) as err:
        from_properties(_ssl(stores, **{"ssl.keystore.location": missing}))
    assert err.value.key == "ssl.keystore.location"
    assert missing in str(err.value) and "No such file" in str(err.value)


def test_unreadable_truststore_names_key_and_path(stores: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as err:  # a directory cannot be read as a file, even by root
        from_properties(_ssl(stores, **{"ssl.truststore.location": stores["dir"]}))
    assert err.value.key == "ssl.truststore.location" and stores["dir"] in str(err.value)


def test_a_file_that_is_not_pem_is_refused(stores: dict[str, str], tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"\x00\x01 not a certificate")
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        with pytest.raises(ConfigError) as err:
            from_properties(_ssl(stores, **{key: str(garbage)}))
        assert err.value.key == key and "not a PEM file" in str(err.value)


def test_a_keystore_without_its_key_is_refused(stores: dict[str, str]) -> None:
    # the CA's certificate alone: a PEM file, but no private key in it
    with pytest.raises(ConfigError) as err:
        from_properties(_ssl(stores, **{"ssl.keystore.location": stores["ca"]}))
    assert err.value.key == "ssl.keystore.location" and "key" in str(err.value)


def test_an_encrypted_key_needs_ssl_key_password(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    bundle = ca.issue("node1", ["127.0.0.1"])
    key_end = bundle.index(b"-----END PRIVATE KEY-----") + len(b"-----END PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(bundle[:key_end], None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    (tmp_path / "node.pem").write_bytes(encrypted + bundle[key_end:])
    (tmp_path / "ca.pem").write_bytes(ca.pem)
    stores = {"node": str(tmp_path / "node.pem"), "ca": str(tmp_path / "ca.pem")}
    with pytest.raises(ConfigError) as err:
        from_properties(_ssl(stores))
    assert err.value.key == "ssl.key.password"
    assert from_properties(_ssl(stores, **{"ssl.key.password": "s3cret"})).listener_ssl()


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("listener.security.protocol.map", "CONTROLLER:SASL_SSL", "not supported"),
        ("listener.security.protocol.map", "CONTROLLER", "LISTENER:PROTOCOL"),
        ("listener.security.protocol.map", "OTHER:SSL", "every listener"),
        ("ssl.keystore.type", "JKS", "PEM"),
        ("ssl.truststore.type", "PKCS12", "PEM"),
        ("ssl.client.auth", "always", "required | requested | none"),
        ("ssl.endpoint.identification.algorithm", "ldaps", "https or empty"),
    ],
)
def test_bad_security_values_name_the_key(stores: dict[str, str], key: str, value: str,
                                          accepted: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_properties(_ssl(stores, **{key: value}))
    assert err.value.key == key and accepted in str(err.value)


def test_kraft_node_with_a_missing_pem_exits_64_with_one_line(stores: dict[str, str],
                                                              tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    config = tmp_path / "server.properties"
    config.write_text(render(_ssl(stores, **{"ssl.truststore.location": missing})))
    done = subprocess.run([sys.executable, "-m", "harness.cli", "node", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 64
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "ssl.truststore.location" in lines[0] and missing in lines[0]


def test_client_settings_of_a_command_config(stores: dict[str, str]) -> None:
    assert tls.client_settings({}) is None
    assert tls.client_settings({"security.protocol": "PLAINTEXT"}) is None
    settings = tls.client_settings({"security.protocol": "SSL",
                                    "ssl.truststore.location": stores["ca"],
                                    "ssl.truststore.type": "PEM"})
    assert settings == tls.TlsSettings(truststore=stores["ca"])
    for bad in ({"security.protocol": "SASL_SSL"}, {"ssl.truststore.locaton": "x"},
                {"security.protocol": "SSL", "ssl.keystore.type": "JKS"}):
        with pytest.raises(ValueError):
            tls.client_settings(bad)


def test_kraft_quorum_refuses_a_bad_command_config_with_64(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reference_node import quorum_cli

    config = tmp_path / "client.properties"
    for text, named in [("security.protocol=SSL\nssl.truststore.location=/nope.pem\n",
                         "/nope.pem"),
                        ("security.protocol=SSL\nssl.trustore.location=/x\n",
                         "ssl.trustore.location"),
                        ("security.protocol=SASL_SSL\n", "SASL_SSL")]:
        config.write_text(text)
        assert quorum_cli.main(["--bootstrap-controller", "127.0.0.1:1", "--command-config",
                                str(config), "describe", "--status"]) == 64
        err = capsys.readouterr().err.strip()
        assert named in err and "\n" not in err
    assert quorum_cli.main(["--bootstrap-controller", "127.0.0.1:1", "--command-config",
                            str(tmp_path / "missing"), "describe", "--status"]) == 64
    assert "cannot read --command-config" in capsys.readouterr().err
