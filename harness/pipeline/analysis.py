"""What one analysis found and where it wrote it: made by `job`, drawn by `report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Analysis:
    """What an analysis found and where it wrote it."""

    out: Path
    found: int
    analyzed: int
    skipped: list[tuple[str, str]]  # (run_id, problem)
    seconds: float
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step, for the bench
