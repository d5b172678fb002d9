"""Rules of the broker lifecycle at its edges: an answer to a request the broker gave up on is
ignored (docs/mutation-testing.md lists the mutants that first showed them unchecked)."""

from __future__ import annotations

import dataclasses

from test_brokers import INTERVAL, started

from reference_node.raft.api import Receive, Tick
from reference_node.raft.messages import BrokerRegistrationResponse


def test_an_answer_to_a_request_the_broker_gave_up_on_is_ignored() -> None:
    """The host pairs answers with their requests; an answer to an older request (here a
    registration answered long ago, arriving again with another broker epoch) must not be taken
    for the answer to the heartbeat now in flight: Kafka matches answers by correlation id."""
    net = started()
    old_request, old_answer = next(
        (req, resp) for dst, resp, req in net.answers
        if dst == 4 and isinstance(resp, BrokerRegistrationResponse))
    before = net.status(4)
    net.now += INTERVAL
    net.step(4, Tick(net.now))  # a heartbeat goes out and stays in flight
    assert net.cores[4].broker_lifecycle is not None
    assert net.cores[4].broker_lifecycle.in_flight is not None
    stale = dataclasses.replace(old_answer, broker_epoch=before.broker_epoch + 100)
    net.step(4, Receive(net.leader(), stale, old_request))
    after = net.status(4)
    assert (after.state, after.broker_epoch) == ("active", before.broker_epoch)
    assert net.cores[4].broker_lifecycle.in_flight is not None
