"""The docker backend probes a link from src's container to an echo of its own in dst's
(`CanProbeLink`): a probe across an iptables cut is blocked, one along an open link passes, with
no daemon running; and a partition's start records that evidence."""

from __future__ import annotations

import time

import pytest

from contracts.backend import CanProbeLink
from harness.backends.docker import DockerBackend
from nemesis.base import Env
from nemesis.partition import Partition

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_a_probe_across_a_cut_is_blocked_and_one_along_an_open_link_passes(
        cluster: DockerBackend) -> None:
    assert isinstance(cluster, CanProbeLink)
    try:
        assert cluster.probe("n1", "n2") and cluster.probe("n2", "n1")
        cluster.partition([("n1", "n2")])
        began = time.monotonic()
        assert not cluster.probe("n1", "n2", 1.0)
        assert time.monotonic() - began < 10  # the timeout plus one SSH round trip
        assert not cluster.probe("n2", "n1", 1.0)  # the SYN-ACK to n1 is dropped too
        assert cluster.probe("n1", "n3") and cluster.probe("n3", "n2")
        cluster.heal()
        assert cluster.probe("n1", "n2") and cluster.probe("n2", "n1")
    finally:
        cluster.heal()


def test_a_partition_start_records_its_cut_blocked_and_an_open_link_passing(
        cluster: DockerBackend) -> None:
    fault = Partition(Env(cluster, object(), ["n1", "n2", "n3"]), ["one"])  # type: ignore[arg-type]
    try:
        done = fault.start({"shape": "one", "isolated": "n3",
                            "cut": [["n1", "n3"], ["n2", "n3"], ["n3", "n1"], ["n3", "n2"]]})
        assert done["evidence"] == {"cut": {"n1->n3": "blocked", "n3->n1": "blocked"},
                                    "open": {"n1->n2": "passes"}}
        assert fault.stop()["evidence"] == {"restored": {"n1->n3": "passes",
                                                         "n3->n1": "passes"}}
    finally:
        fault.heal()
