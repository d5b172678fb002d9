"""Brokers on the wire, without processes: the node's configuration of roles and broker keys, the
BrokerRegistration / BrokerHeartbeat mapping both ways at every version, and what the client API
serves of brokers (`__brokers`, Metadata, ApiVersions, the refused Produce) from a fake node."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from reference_node.brokers_cli import format_table, view_json
from reference_node.config import ConfigError, Endpoint, from_properties
from reference_node.raft import messages as m
from reference_node.raft.api import QuorumDescription
from reference_node.raft.lifecycle import BrokerStatus, new_incarnation
from reference_node.raft.records import BrokerInfo, encode_fence, encode_register
from reference_node.server import translate
from reference_node.server.client_api import ClientApi
from reference_node.server.metrics import Metrics
from reference_node.wire import apis
from reference_node.wire.brokers_view import BrokersView, ViewRefused, parse_brokers_view
from reference_node.wire.codec import Request
from reference_node.wire.records import build_append_batch, build_batch
from reference_node.wire.requests import fetch_request, metadata_request, produce_request

from .fake_node import NodeApiFake

ErrorCode = m.ErrorCode

BROKER = {
    "node.id": "4",
    "process.roles": "broker",
    "controller.quorum.voters": "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095",
    "listeners": "CONTROLLER://127.0.0.1:9096",
    "metadata.log.dir": "/tmp/x",
}

# --- configuration -------------------------------------------------------------------------


def test_broker_roles_and_keys() -> None:
    cfg = from_properties({**BROKER, "broker.session.timeout.ms": "3000",
                           "broker.heartbeat.interval.ms": "500",
                           "broker.heartbeat.timeout.ms": "4500"})
    assert cfg.process_roles == ("broker",)
    assert cfg.is_broker and not cfg.is_controller
    assert (cfg.broker_session_timeout_ms, cfg.broker_heartbeat_interval_ms,
            cfg.broker_heartbeat_timeout_ms) == (3000, 500, 4500)
    assert cfg.advertised == Endpoint("127.0.0.1", 9096)
    # Kafka's combined mode: a voter that is a broker of the same id; a broker alone may not
    # take a voter's id
    combined = from_properties({**BROKER, "node.id": "1", "process.roles": "controller,broker",
                                "listeners": "CONTROLLER://127.0.0.1:19093"})
    assert combined.is_broker and combined.is_controller
    with pytest.raises(ConfigError, match="is a voter"):
        from_properties({**BROKER, "node.id": "1"})
    defaults = from_properties(BROKER)
    assert (defaults.broker_session_timeout_ms, defaults.broker_heartbeat_interval_ms,
            defaults.broker_heartbeat_timeout_ms) == (9000, 2000, 12000)


def test_a_broker_may_listen_on_a_non_controller_listener_and_advertise_another() -> None:
    cfg = from_properties({**BROKER, "listeners": "PLAINTEXT://0.0.0.0:9092",
                           "advertised.listeners": "PLAINTEXT://broker4.example:19092"})
    assert cfg.listen == Endpoint("0.0.0.0", 9092)
    assert cfg.advertised == Endpoint("broker4.example", 19092)
    with pytest.raises(ConfigError, match=r"controller\.listener\.names"):
        from_properties({**BROKER, "process.roles": "controller", "node.id": "1",
                         "listeners": "PLAINTEXT://0.0.0.0:9092"})


@pytest.mark.parametrize(("extra", "key", "words"), [
    ({"broker.heartbeat.timeout.ms": "9000"}, "broker.heartbeat.timeout.ms",
     "not above broker.session.timeout.ms"),
    ({"broker.session.timeout.ms": "1000"}, "broker.heartbeat.interval.ms",
     "not below broker.session.timeout.ms"),
    ({"node.id": "2"}, "node.id", "is a voter"),
    ({"listeners": "CONTROLLER://127.0.0.1:0"}, "listeners", "port 0"),
    ({"process.roles": "broker,broker"}, "process.roles", "controller | broker"),
    ({"process.roles": "observer"}, "process.roles", "controller | broker"),
    ({"broker.session.timeout.ms": "0"}, "broker.session.timeout.ms", "an integer in"),
])
def test_bad_broker_settings_name_the_key(extra: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_properties({**BROKER, **extra})
    assert err.value.key == key
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_a_broker_needs_a_quorum_to_follow() -> None:
    props = dict(BROKER)
    del props["controller.quorum.voters"]
    with pytest.raises(ConfigError, match=r"controller\.quorum\.bootstrap\.servers"):
        from_properties(props)
    cfg = from_properties({**props, "controller.quorum.bootstrap.servers": "127.0.0.1:19093"})
    assert cfg.is_broker and cfg.voters == {}


# --- the wire mapping ------------------------------------------------------------------------

INCARNATION = new_incarnation(1_700_000_000_000, __import__("random").Random(1))


def roundtrip(obj: Any) -> Any:
    """Encoded and decoded again, as the wire carries it."""
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return entity_reader(type(obj))(buf.getvalue(), 0)[0]


@pytest.mark.parametrize("version", range(0, 5))
def test_registration_request_roundtrips_at_every_version(version: int) -> None:
    msg = m.BrokerRegistrationRequest(4, "MkU3OEVBNTcwNTJENDM2Qk", INCARNATION, "h4", 9096)
    kio = roundtrip(translate.broker_request_to_kio(msg, version, "PLAINTEXT", "SSL"))
    assert kio.listeners[0].security_protocol == 1
    assert translate.broker_request_from_kio(apis.BROKER_REGISTRATION, kio) == msg


@pytest.mark.parametrize("version", range(0, 2))
def test_heartbeat_request_roundtrips(version: int) -> None:
    msg = m.BrokerHeartbeatRequest(4, 17, 230, want_fence=False, want_shutdown=True)
    kio = roundtrip(translate.broker_request_to_kio(msg, version))
    assert translate.broker_request_from_kio(apis.BROKER_HEARTBEAT, kio) == msg


@pytest.mark.parametrize("resp", [
    m.BrokerRegistrationResponse(ErrorCode.none, 17),
    m.BrokerRegistrationResponse(ErrorCode.duplicate_broker_registration),
    m.BrokerHeartbeatResponse(ErrorCode.none, is_caught_up=True, is_fenced=False),
    m.BrokerHeartbeatResponse(ErrorCode.stale_broker_epoch),
    m.BrokerHeartbeatResponse(ErrorCode.none, True, True, should_shut_down=True),
])
def test_responses_roundtrip(resp: Any) -> None:
    key = translate.broker_api_key(resp)
    for version in range(apis.SUPPORTED_APIS[key].min, apis.SUPPORTED_APIS[key].max + 1):
        kio = roundtrip(translate.broker_response_to_kio(key, version, resp))
        assert translate.broker_response_from_kio(key, kio) == resp


def test_registration_without_listener_or_incarnation_is_refused_before_the_core() -> None:
    msg = m.BrokerRegistrationRequest(4, "c", INCARNATION, "h4", 9096)
    kio = translate.broker_request_to_kio(msg, 4)
    import dataclasses
    with pytest.raises(translate.BadBrokerRequest, match="listener"):
        translate.broker_request_from_kio(apis.BROKER_REGISTRATION,
                                          dataclasses.replace(kio, listeners=()))
    for none in (None, uuid.UUID(int=0)):
        with pytest.raises(translate.BadBrokerRequest, match="incarnation"):
            translate.broker_request_from_kio(apis.BROKER_REGISTRATION,
                                              dataclasses.replace(kio, incarnation_id=none))
    refusal = translate.broker_refusal_to_kio(apis.BROKER_HEARTBEAT, 1, ErrorCode.invalid_request)
    assert (refusal.error_code, refusal.is_fenced) == (ErrorCode.invalid_request, True)


def test_outbound_is_sent_at_the_best_common_version() -> None:
    msg = m.BrokerHeartbeatRequest(4, 17, 230)
    outbound = translate.broker_outbound(msg)
    assert outbound.api_key == apis.BROKER_HEARTBEAT
    assert outbound.versions == apis.SUPPORTED_APIS[apis.BROKER_HEARTBEAT]
    assert outbound.build(0).__version__ == 0


# --- the client API on a fake node -------------------------------------------------------------

B4 = BrokerInfo(4, INCARNATION, 10, "127.0.0.1", 9096, fenced=False, since=12)
B5 = BrokerInfo(5, INCARNATION, 11, "127.0.0.1", 9097, fenced=True, since=20)


@dataclass
class FakeNode(NodeApiFake):
    """A controller leading epoch 3 (status None), or broker 4 (with a status)."""

    status: BrokerStatus | None = None
    node_id: int = 1
    cluster_id: str = "MkU3OEVBNTcwNTJENDM2Qk"
    read_error: ErrorCode = ErrorCode.none
    appended: list[tuple[bytes, ...]] = field(default_factory=list)
    kraft_version: int = 0

    def leader_id(self) -> int | None:
        return 1

    def epoch(self) -> int:
        return 3

    def high_watermark(self) -> int:
        return 50

    def log_start_offset(self) -> int:
        return 0

    def log_end_offset(self) -> int:
        return 50

    def voter_ids(self) -> list[int]:
        return [1, 2, 3]

    def client_address(self, node_id: int) -> Endpoint | None:
        return Endpoint("127.0.0.1", 9000 + node_id)

    def is_controller(self) -> bool:
        return self.status is None

    def describe_quorum(self) -> QuorumDescription:
        return QuorumDescription(1, 3, 50, (), (), None, self.kraft_version)

    def broker_status(self) -> BrokerStatus | None:
        return self.status

    def brokers_view(self) -> dict[int, BrokerInfo]:
        return {4: B4, 5: B5}

    def _done(self, value: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(value)
        return fut

    def read_image(self) -> asyncio.Future[Any]:
        from reference_node.raft.api import ReadReply
        if self.read_error != ErrorCode.none:
            return self._done(ReadReply(0, self.read_error, -1, (), 2, 4))
        return self._done(ReadReply(0, ErrorCode.none, 50, (), 1, 3, kv=(), brokers=(B4, B5)))

    def append(self, payloads: tuple[bytes, ...]) -> asyncio.Future[Any]:
        from reference_node.raft.api import AppendReply
        self.appended.append(payloads)
        return self._done(AppendReply(0, ErrorCode.none, (50,)))


def serving(serving: bool = True, self_fenced: bool = False) -> BrokerStatus:
    return BrokerStatus("active" if serving else "inactive", INCARNATION, 10, self_fenced,
                        serving, 120, 48)


def answer(node: FakeNode, api_key: int, version: int, body: Any) -> Any:
    async def handle() -> Any:
        return await ClientApi(node).handlers[api_key](Request(api_key, version, 1, "t", body))

    return asyncio.run(handle())


def brokers_fetch(node: FakeNode, version: int = 12, offset: int = 0) -> Any:
    resp = answer(node, apis.FETCH, version, fetch_request(version, offset, topic="__brokers"))
    return resp.responses[0].partitions[0]


def test_the_view_on_a_controller_is_the_leaders_image() -> None:
    part = brokers_fetch(FakeNode())
    assert (part.error_code, part.high_watermark) == (ErrorCode.none, 50)
    own, brokers = parse_brokers_view(part.records)
    assert own is None
    assert brokers == {4: B4.to_json(), 5: B5.to_json()}
    refused = brokers_fetch(FakeNode(read_error=ErrorCode.not_leader_or_follower))
    assert refused.error_code == ErrorCode.not_leader_or_follower


def test_the_view_on_a_broker_starts_with_its_own_report() -> None:
    node = FakeNode(status=serving(), node_id=4)
    part = brokers_fetch(node)
    assert (part.error_code, part.high_watermark) == (ErrorCode.none, 48)
    own, brokers = parse_brokers_view(part.records)
    assert own == {"node": 4, "role": "broker", "state": "active",
                   "incarnation": str(INCARNATION), "epoch": 10, "self_fenced": False,
                   "contact_age_ms": 120, "offset": 48}
    assert list(brokers) == [4, 5]
    # from offset 1 on: the brokers only
    assert parse_brokers_view(brokers_fetch(node, offset=1).records)[0] is None
    assert brokers_fetch(node, offset=9).error_code == ErrorCode.offset_out_of_range


@pytest.mark.parametrize("status", [serving(False), serving(True, self_fenced=True)])
def test_a_broker_that_does_not_serve_refuses(status: BrokerStatus) -> None:
    status = BrokerStatus(status.state, status.incarnation, status.broker_epoch,
                          status.self_fenced, False, status.contact_age_ms,
                          status.metadata_offset)
    node = FakeNode(status=status, node_id=4)
    assert brokers_fetch(node).error_code == ErrorCode.broker_not_available
    meta = answer(node, apis.METADATA, 12, metadata_request(12))
    assert meta.brokers == ()
    assert [t.error_code for t in meta.topics] == [ErrorCode.broker_not_available]


@pytest.mark.parametrize("version", [1, 9, 12])
def test_metadata_on_a_broker_lists_the_unfenced_brokers(version: int) -> None:
    meta = answer(FakeNode(status=serving(), node_id=4), apis.METADATA, version,
                  metadata_request(version))
    assert [(b.node_id, b.port) for b in meta.brokers] == [(4, 9096)]
    assert meta.controller_id == 4
    controller = answer(FakeNode(), apis.METADATA, version, metadata_request(version))
    assert [b.node_id for b in controller.brokers] == [1, 2, 3]


def test_api_versions_of_a_broker_leave_out_the_controllers_apis() -> None:
    body = apis.request_class(apis.API_VERSIONS, 3)(client_software_name="t",
                                                    client_software_version="1")
    keys = {int(k.api_key) for k in answer(FakeNode(status=serving(), node_id=4),
                                           apis.API_VERSIONS, 3, body).api_keys}
    assert apis.BROKER_HEARTBEAT not in keys and apis.FETCH in keys
    keys = {int(k.api_key) for k in answer(FakeNode(), apis.API_VERSIONS, 3, body).api_keys}
    assert {apis.BROKER_REGISTRATION, apis.BROKER_HEARTBEAT} <= keys


def _features(version: int, node: FakeNode) -> tuple[dict[str, tuple[int, int]], Any]:
    body = apis.request_class(apis.API_VERSIONS, version)(client_software_name="t",
                                                          client_software_version="1")
    resp = answer(node, apis.API_VERSIONS, version, body)
    supported = {k.name: (int(k.min_version), int(k.max_version))
                 for k in resp.supported_features}
    return supported, resp


def test_api_versions_advertise_kraft_version_as_kafka_does() -> None:
    """KIP-853: a Kafka leader's AddVoterHandler asks the new voter's ApiVersions and refuses it
    unless SupportedFeatures' kraft.version covers the level in effect. From v4 the feature is
    listed (0..1); below, Kafka omits a feature whose minimum is 0 (KAFKA-17492), and so do we.
    FinalizedFeatures names the level in effect once it is above 0, at the last committed
    offset (KRaftMetadataCache.features)."""
    assert apis.SUPPORTED_APIS[apis.API_VERSIONS].max == 4
    supported, resp = _features(4, FakeNode(kraft_version=1))
    assert supported == {"kraft.version": (0, 1)}
    assert [(k.name, int(k.min_version_level), int(k.max_version_level))
            for k in resp.finalized_features] == [("kraft.version", 1, 1)]
    assert resp.finalized_features_epoch == 49
    supported, resp = _features(4, FakeNode(status=serving(), node_id=4))
    assert supported == {"kraft.version": (0, 1)}
    assert resp.finalized_features == () and resp.finalized_features_epoch == -1
    supported, resp = _features(3, FakeNode(kraft_version=1))
    assert supported == {} and resp.finalized_features_epoch == 49


@pytest.mark.parametrize("payload", [encode_register(9, INCARNATION, "evil", 1),
                                     encode_fence(4, 10, "want-fence")])
def test_a_produced_broker_record_is_refused(payload: bytes) -> None:
    node = FakeNode()
    records = build_batch(0, -1, [b"x", payload])
    resp = answer(node, apis.PRODUCE, 9, produce_request(9, records))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.invalid_record
    assert "controller" in part.error_message
    assert [int(e.batch_index) for e in part.record_errors] == [1]
    assert node.appended == []
    ok = answer(node, apis.PRODUCE, 9, produce_request(9, build_append_batch([1])))
    assert ok.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_broker_gauges_render() -> None:
    metrics = Metrics(4, lambda: {"current-state": "observer", "broker-state": "active",
                                  "broker-epoch": 10})
    text = metrics.render()
    assert 'kafka_raft_manager_broker_state{node_id="4",state="active"} 1.0' in text
    assert 'kafka_raft_manager_broker_epoch{node_id="4"} 10.0' in text


def test_cli_formats() -> None:
    view = BrokersView(48, 4, {"node": 4, "role": "broker", "state": "active", "epoch": 10,
                               "incarnation": str(INCARNATION), "self_fenced": False,
                               "contact_age_ms": 5, "offset": 48},
                       {4: B4.to_json(), 5: B5.to_json()})
    text = format_table(view)
    assert "BrokerId" in text and "127.0.0.1:9096" in text and "inactive" in text
    assert view.unfenced() == [4]
    as_json = view_json(view)
    assert as_json["role"] == "broker" and set(as_json["brokers"]) == {"4", "5"}
    json.dumps(as_json)
    assert ViewRefused(8).error_name == "broker-not-available"
