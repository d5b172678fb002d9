"""The reference target's exits by design match what its node says when it makes them: a refusal
to start on a damaged disk (issue 41: a log start no snapshot vouches for) after a disk fault."""

from __future__ import annotations

import re
from pathlib import Path

from harness.targets.reference import ReferenceTarget
from reference_node.storage.node import invalid_log_refusal


def test_a_refused_start_on_a_damaged_disk_is_by_design_after_a_disk_fault() -> None:
    partition = Path("/data/n2/__cluster_metadata-0")
    found = f"{partition}: the log starts at offset 40 but no valid snapshot ends at or above it"
    # process.serve's line for a StorageError at open
    line = f"ERROR [reference_node.server.process] cannot open /data/n2: " \
           f"{invalid_log_refusal(found, partition, 40)}"
    matching = [e for e in ReferenceTarget.designed_exits if re.search(e.pattern, line)]
    assert len(matching) == 1
    assert {"corrupt", "power-loss"} <= set(matching[0].after)
    # the refusal's own words match too, should the prefix change
    bare = invalid_log_refusal(found, partition, 40)
    assert any(re.search(e.pattern, bare) for e in ReferenceTarget.designed_exits)
