"""The contracts every part of the harness shares, and nothing else: the bottom layer.

- `backend`: where a target's nodes live (`Backend`, `ClusterSpec`, `CommandResult`,
  `BackendError`) and the optional power to cut links (`CanPartition`);
- `target`: the implementation under test as a `DB` and a `Client`, its optional powers
  (`CanKill`, `CanPause`, `HasLeader`, `HasDataDir`, `CanChangeMembership`, `CanDeployBrokers`,
  `CanReplayRegistration`), and the `Target` that makes both;
- `disk`: the disk levers the runner hands the disk faults (`CanFaultDisk`);
- `history`: the op type (`Op`, a plain dict of the history format) and the run's `History`
  recorder (history.jsonl);
- `generator`: pure generators of ops, and the combinators the runner wraps a workload's in;
- `workload`: a `Workload` (its generator, its final op, the `Checker` that judges its history).

Backends, targets, workloads, nemeses, the runner and the checkers all import from here; this
package imports from none of them, so the arrows between the parts run one way (see
docs/architecture.md; tests/test_layers.py holds every package to its arrows).
"""
