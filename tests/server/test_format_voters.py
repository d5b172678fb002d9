"""`kraft node format` with KIP-853's flags (--standalone, --initial-controllers,
--no-initial-controllers), `controller.quorum.bootstrap.servers`, and what the node opens."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reference_node import cli, properties
from reference_node.config import ConfigError, Endpoint, from_properties
from reference_node.properties import render
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.server.storage_adapter import Disk
from reference_node.storage import METADATA_PARTITION_DIR, MetaProperties
from reference_node.storage.kraft_records import parse_uuid_text, uuid_text
from reference_node.storage.snapshot import BOOTSTRAP_SNAPSHOT_ID, decode_snapshot

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
DIRS = {1: "W-emVU2rQe2UkVBTminnBw", 2: "JEXY6aqzQY-32P5TStzaFg", 3: "MvDxzVmcRsaTz33bUuRU6A"}
INITIAL = ",".join(f"{i}@127.0.0.{i}:{9092 + i}:{d}" for i, d in DIRS.items())


def write_config(tmp_path: Path, **overrides: str | None) -> Path:
    """A dynamic-quorum node 2 (bootstrap servers, no static voters) unless overridden; a None
    value removes the key."""
    props: dict[str, str | None] = {
        "node.id": "2", "process.roles": "controller",
        "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.2:9094", "metadata.log.dir": str(tmp_path / "data"),
    }
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    path = tmp_path / "node.properties"
    path.write_text(render({k: v for k, v in props.items() if v is not None}))
    return path


def run_format(config: Path, *flags: str) -> int:
    return cli.main(["format", "--config", str(config), "--cluster-id", CLUSTER, *flags])


def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "data" / METADATA_PARTITION_DIR / CHECKPOINT


def bootstrap_voters(tmp_path: Path) -> VoterSet:
    image = decode_snapshot(checkpoint(tmp_path).read_bytes(), BOOTSTRAP_SNAPSHOT_ID)
    assert image.kraft_version == 1 and image.voters is not None
    return image.voters


# --- the flags ----------------------------------------------------------------------------------


def test_standalone_makes_this_node_the_one_voter(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run_format(write_config(tmp_path), "--standalone") == cli.EXIT_OK
    meta = MetaProperties.load(tmp_path / "data")
    assert bootstrap_voters(tmp_path) == VoterSet([
        Voter(2, meta.directory_uuid, (VoterEndpoint("CONTROLLER", "127.0.0.2", 9094),))])
    out = capsys.readouterr().out.strip()
    assert out == (f"Formatted {tmp_path / 'data'} (node.id=2, cluster.id={CLUSTER}, "
                   f"directory.id={meta.directory_id}), bootstrap checkpoint with voters "
                   f"2@127.0.0.2:9094:{meta.directory_id} (kraft.version 1)")


def test_standalone_on_a_wildcard_listener_names_localhost(tmp_path: Path) -> None:
    """Kafka's rule for a listener with no host; the endpoint is the controller listener's."""
    config = write_config(tmp_path, listeners="PLAIN://127.0.0.9:1,CTRL://0.0.0.0:9999",
                          **{"controller.listener.names": "CTRL"})
    assert run_format(config, "-s") == cli.EXIT_OK
    (voter,) = bootstrap_voters(tmp_path)
    assert voter.endpoints == (VoterEndpoint("CTRL", "localhost", 9999),)


def test_initial_controllers_name_every_voter_and_this_nodes_directory(tmp_path: Path) -> None:
    config = write_config(tmp_path, **{"controller.listener.names": "CONTROLLER"})
    assert run_format(config, "--initial-controllers", INITIAL) == cli.EXIT_OK
    assert MetaProperties.load(tmp_path / "data").directory_id == DIRS[2]
    assert bootstrap_voters(tmp_path) == VoterSet(
        Voter(i, parse_uuid_text(d), (VoterEndpoint("CONTROLLER", f"127.0.0.{i}", 9092 + i),))
        for i, d in DIRS.items())


def test_initial_controllers_take_bracketed_ipv6_hosts(tmp_path: Path) -> None:
    value = f"2@[::1]:9094:{DIRS[2]}, 5@[fe80::1]:1:{DIRS[3]}"
    assert run_format(write_config(tmp_path), "-I", value) == cli.EXIT_OK
    assert [v.endpoints[0].host for v in bootstrap_voters(tmp_path)] == ["::1", "fe80::1"]


def test_no_initial_controllers_writes_no_checkpoint(tmp_path: Path) -> None:
    assert run_format(write_config(tmp_path), "--no-initial-controllers") == cli.EXIT_OK
    assert not checkpoint(tmp_path).exists()
    assert MetaProperties.load(tmp_path / "data").directory_uuid is not None


def test_static_voters_without_a_flag_keep_kraft_version_0(tmp_path: Path) -> None:
    config = write_config(tmp_path, **{"controller.quorum.voters": "2@127.0.0.2:9094",
                                       "controller.quorum.bootstrap.servers": None})
    assert run_format(config) == cli.EXIT_OK
    assert not checkpoint(tmp_path).exists()
    assert MetaProperties.load(tmp_path / "data").directory_id is not None


def test_ignore_formatted_leaves_a_formatted_directory_as_it_is(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert run_format(config, "--no-initial-controllers") == cli.EXIT_OK
    before = (tmp_path / "data" / "meta.properties").read_text()
    assert run_format(config, "--standalone", "--ignore-formatted") == cli.EXIT_OK
    assert not checkpoint(tmp_path).exists()
    assert (tmp_path / "data" / "meta.properties").read_text() == before
    assert run_format(config, "--standalone") == cli.EXIT_FAILURE  # formatted, not ignored


# --- bad input: one line, exit 64, nothing written ---------------------------------------------


@pytest.mark.parametrize(("overrides", "flags", "message"), [
    ({"controller.quorum.voters": "2@127.0.0.2:9094"}, ["--standalone"],
     "--standalone makes a dynamic quorum (KIP-853), but the config sets "
     "controller.quorum.voters"),
    ({"controller.quorum.voters": "2@127.0.0.2:9094"}, ["--initial-controllers", INITIAL],
     "--initial-controllers makes a dynamic quorum"),
    ({}, [], "controller.quorum.voters is not set in the config, so pass one of --standalone, "
             "--initial-controllers or --no-initial-controllers"),
    ({}, ["--initial-controllers", f"1@h:9093:{DIRS[1]},3@h:9095:{DIRS[3]}"],
     "does not name this node (node.id=2); add 2@HOST:PORT:DIRECTORY_ID"),
    ({}, ["-I", "2@127.0.0.2:9094"], "'2@127.0.0.2:9094': no ':DIRECTORY_ID' after the port"),
    ({}, ["-I", f"x@h:1:{DIRS[2]}"], "node id 'x' is not a non-negative integer"),
    ({}, [f"--initial-controllers=-2@h:1:{DIRS[2]}"], "node id '-2' is not a non-negative"),
    ({}, ["-I", f"2h:1:{DIRS[2]}"], "no '@' after the node id"),
    ({}, ["-I", f"2@h:99999:{DIRS[2]}"], "port '99999' is not in 0..65535"),
    ({}, ["-I", f"2@[::1:9094:{DIRS[2]}"], "needs a closing ']'"),
    ({}, ["-I", "2@h:9094:nope"], "'nope' is not a Kafka Uuid"),
    ({}, ["-I", "2@h:9094:AAAAAAAAAAAAAAAAAAAAAA"], "the zero Uuid"),
    ({}, ["-I", f"2@h:1:{DIRS[2]},2@h:2:{DIRS[3]}"], "names node 2 twice"),
    ({}, ["-I", " , "], "--initial-controllers is empty"),
])
def test_bad_input_is_one_line_and_exit_64(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           overrides: dict[str, str], flags: list[str],
                                           message: str) -> None:
    assert run_format(write_config(tmp_path, **overrides), *flags) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("kraft node format: ") and err.count("\n") == 1, err
    assert message in err
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_the_flags_exclude_each_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_format(write_config(tmp_path), "--standalone", "--no-initial-controllers")
    assert code == cli.EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_the_command_line_exits_64_with_one_line(tmp_path: Path) -> None:
    """The real command, as an operator runs it."""
    config = write_config(tmp_path, **{"controller.quorum.voters": "2@127.0.0.2:9094"})
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "node", "format", "--config",
                           str(config), "--cluster-id", CLUSTER, "--standalone"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 64
    assert proc.stderr.count("\n") == 1 and "controller.quorum.voters" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "node", "format", "--config",
                           str(write_config(tmp_path)), "--cluster-id", CLUSTER, "--standalone"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert checkpoint(tmp_path).exists()


# --- what the node opens -----------------------------------------------------------------------


def test_the_disk_gives_the_core_the_directory_id_and_the_bootstrap_image(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert run_format(config, "--initial-controllers", INITIAL) == cli.EXIT_OK
    disk = Disk(from_properties(_props(config)))
    try:
        assert disk.directory_id == parse_uuid_text(DIRS[2])
        start = disk.open_snapshots()
        assert start.image is not None and start.image.snapshot_id == BOOTSTRAP_SNAPSHOT_ID
        assert start.image.voters == bootstrap_voters(tmp_path)
        assert start.image.kraft_version == 1
        # Never served: Kafka's leader refuses to send the bootstrap checkpoint.
        assert start.snapshot_ids == [] and start.log_invalid is None
    finally:
        disk.close()


def _props(config: Path) -> dict[str, str]:
    return properties.parse(config.read_text())


# --- controller.quorum.bootstrap.servers -----------------------------------------------------------


BASE = {"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093", "metadata.log.dir": "/tmp/x"}


def test_bootstrap_servers_make_the_static_voters_optional() -> None:
    cfg = from_properties({**BASE, "controller.quorum.bootstrap.servers":
                           "127.0.0.1:9093, [::1]:9094,node-3:9095"})
    assert cfg.bootstrap_servers == (Endpoint("127.0.0.1", 9093), Endpoint("::1", 9094),
                                     Endpoint("node-3", 9095))
    assert cfg.voters == {} and not cfg.is_voter
    both = from_properties({**BASE, "controller.quorum.voters": "1@127.0.0.1:9093",
                            "controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    assert both.is_voter and both.bootstrap_servers == (Endpoint("127.0.0.1", 9093),)
    empty_voters = from_properties({**BASE, "controller.quorum.voters": "",
                                    "controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    assert empty_voters.voters == {}


@pytest.mark.parametrize(("extra", "problem"), [
    ({}, "missing, and controller.quorum.bootstrap.servers is not set either"),
    ({"controller.quorum.voters": ""}, "empty, and controller.quorum.bootstrap.servers"),
    ({"controller.quorum.bootstrap.servers": ""}, "missing, and"),
])
def test_a_config_with_neither_voters_nor_bootstrap_servers_is_refused(
        extra: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_properties({**BASE, **extra})
    assert err.value.key == "controller.quorum.voters" and problem in str(err.value)
    assert "controller.quorum.bootstrap.servers=HOST:PORT" in str(err.value)


def test_a_malformed_bootstrap_server_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"controller\.quorum\.bootstrap\.servers.*HOST:PORT"):
        from_properties({**BASE, "controller.quorum.bootstrap.servers": "127.0.0.1"})


def test_uuid_text_is_what_meta_properties_holds(tmp_path: Path) -> None:
    assert run_format(write_config(tmp_path), "--no-initial-controllers") == cli.EXIT_OK
    meta = MetaProperties.load(tmp_path / "data")
    assert meta.directory_uuid is not None
    assert uuid_text(meta.directory_uuid) == meta.directory_id
    assert isinstance(meta.directory_uuid, uuid.UUID)
