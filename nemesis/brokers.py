"""`stale-incarnation`: a broker's earlier process comes back from the dead (issue 17).

Theory of operation. Each broker process has an incarnation id, a UUID drawn at process start (no
order among them); the active controller keeps the incarnation each broker registered with, and
must refuse a registration from ANOTHER incarnation while the registered one's session is live
(unfenced and heard from: DUPLICATE_BROKER_REGISTRATION, Kafka's rule): it comes from a process
that has since been replaced (a zombie, or a registration delayed in the network), and accepting it
would hand the broker id back to that process.

This fault makes such a zombie on purpose. Its choice picks a broker and reads the incarnation it is
registered with (`registration` of `contracts.target.CanReplayRegistration`). The start kills the
broker and starts it again (a new incarnation, registered once the old session ran out), and waits
until that incarnation is registered and unfenced (the proof it took effect; none in time, or no
registration to replay, is `NoEffect`). The stop reads the registration held (`held_before`), sends
the OLD incarnation's BrokerRegistration to the active controller, as the old process would have,
and records its answer and the incarnation it holds after.

Details (the history's values, heal, the deployment side): docs/internals/nemesis.md#brokers
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

from contracts.target import CanKill, CanReplayRegistration
from nemesis.base import Env, Fault, NoEffect
from nemesis.powers import KILL, REPLAY_REGISTRATION
from nemesis.spec import FaultSpec

KIND = "stale-incarnation"
# seconds for the restarted broker to register its new incarnation, and for a replay to find a
# controller that answers it as the active one
REGISTER_TIMEOUT = 40.0  # the old session runs out first (broker.session.timeout.ms, 9 s)
REPLAY_TIMEOUT = 10.0
POLL = 0.25
NOT_SENT = "not-sent"
# answers that say the asked node was not (or no longer) the active controller: ask again
NOT_ACTIVE = ("not_controller", "connect-failed", "timeout", "connection-closed")


def replaced_live(held: dict[str, Any] | None, old: str | None) -> bool:
    """Whether registration `held` is another incarnation than `old`, unfenced: one whose session
    the controller keeps live while its process heartbeats."""
    if held is None or old is None or held.get("fenced") is not False:
        return False
    try:
        return uuid.UUID(str(held.get("incarnation"))) != uuid.UUID(old)
    except ValueError:
        return False


class StaleIncarnation(Fault):
    kind = KIND
    instant = True  # the schedule stops it at once (nemesis/schedule.py)

    def __init__(self, env: Env) -> None:
        if not isinstance(env.db, CanReplayRegistration):
            raise TypeError("the target cannot replay a broker registration")
        if not isinstance(env.db, CanKill):
            raise TypeError("the target cannot kill nodes")
        if not env.brokers:
            raise TypeError("the run has no brokers")
        self.env = env
        self.killer: CanKill = env.db
        self.ops: CanReplayRegistration = env.db
        self.old: dict[str, Any] | None = None  # the registration to replay
        self.node: str | None = None
        self.renewed = False  # whether the restarted broker registered another incarnation

    def choose(self, rng: random.Random) -> dict[str, Any]:
        broker = rng.choice(self.env.brokers)
        old = self.ops.registration(self.env.backend, self.env.nodes, broker)
        choice: dict[str, Any] = {"node": broker,
                                  "old_incarnation": old.get("incarnation") if old else None}
        if old is None:
            choice["reason"] = "no controller knows a registration of it"
        return choice

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        """Kill and restart the broker; proved by the new incarnation the controller then holds,
        unfenced (`evidence`). NoEffect, with the reason, when there is no registration to replay
        (none known, or no address in it: nothing is killed then) or the restarted broker was not
        registered and unfenced in time (no zombie to replay)."""
        node = str(choice["node"])
        self.node, self.renewed = node, False
        old = choice.get("old_incarnation")
        self.old = None
        if old is None:
            raise NoEffect(str(choice.get("reason") or "no registration of it is known"),
                           {node: "not registered"})
        registered = self.ops.registration(self.env.backend, self.env.nodes, node)
        # the one chosen (read again: its host and port, as the old process advertised them)
        replay = registered if registered and registered.get("incarnation") == old else {
            **(registered or {}), "incarnation": old}
        if "host" not in replay:
            raise NoEffect("no controller gave the address of its registration to replay",
                           {node: "registration unknown"})
        self.old = replay
        # a kill, not a stop: the old process gets no say (no controlled shutdown)
        self.killer.kill(self.env.backend, node)
        self.env.db.start(self.env.backend, node)
        new = self._await_replaced(node, str(old))
        if new is None:
            self.old = None
            raise NoEffect(f"the restarted broker was not registered and unfenced within "
                           f"{REGISTER_TIMEOUT:g}s: no zombie to replay",
                           {node: f"killed and restarted; still registered as {old}"})
        self.renewed = True
        return {**choice, "new_incarnation": new,
                "evidence": {node: f"killed and restarted; the controller holds incarnation "
                                   f"{new}"}}

    def _await_replaced(self, node: str, old: str) -> str | None:
        """The incarnation `node` is registered with once it is another than `old`, unfenced;
        or None."""
        deadline = time.monotonic() + REGISTER_TIMEOUT
        while time.monotonic() < deadline:
            now = self.ops.registration(self.env.backend, self.env.nodes, node)
            if now is not None and replaced_live(now, old):
                return str(now["incarnation"])
            time.sleep(POLL)
        return None

    def stop(self) -> dict[str, Any]:
        """Replay the old registration; the registration held just before (`held_before`:
        incarnation, fenced), the controller's answer, and the incarnation it holds after it
        (`held_after`: the new one, unless the replay was accepted)."""
        node, old = self.node, self.old
        self.old = None
        if node is None or old is None or not self.renewed or "host" not in old:
            return {"node": node, "answer": {"error": NOT_SENT, "broker_epoch": -1}}
        before = self.ops.registration(self.env.backend, self.env.nodes, node)
        held_before = None if before is None else {"incarnation": before.get("incarnation"),
                                                   "fenced": before.get("fenced")}
        deadline = time.monotonic() + REPLAY_TIMEOUT
        while True:
            answer = self.ops.register(self.env.backend, self.env.nodes, node, old)
            if answer.get("error") not in NOT_ACTIVE or time.monotonic() > deadline:
                break
            time.sleep(POLL)
        now = self.ops.registration(self.env.backend, self.env.nodes, node)
        held = now.get("incarnation") if now else None
        which = ("the old one" if held == old["incarnation"] else "unknown" if held is None
                 else "another one")
        return {"node": node, "old_incarnation": old["incarnation"], "answer": answer,
                "held_before": held_before, "held_after": held,
                "evidence": {node: f"answered {answer.get('error')}; the controller holds "
                                   f"{which}"}}

    def heal(self) -> None:
        self.old, self.renewed = None, False
        for node in self.env.brokers:
            if node not in self.env.broken and not self.env.backend.is_running(node):
                self.env.db.start(self.env.backend, node)


# asked for by name: it needs brokers
SPECS = (FaultSpec(KIND, (KILL, REPLAY_REGISTRATION),
                   lambda context: StaleIncarnation(context.env)),)
