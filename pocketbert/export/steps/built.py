"""What the build, place and gate steps hand the record step, whether they ran in this process
(export/steps/serial_export.py) or in workers (export/steps/parallel_export.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Built:
    results: list          # parity.ParityResult per variant, in plan order
    placements: dict       # file name -> placement.ProgramPlacement, Apple programs in plan order
    ort_usability: dict    # file name -> mobile_usability verdicts
    app_tokenizers: dict   # language -> the app tokenizer check's record
    notes: dict            # the builders' notes for the manifest
    timings: dict          # seconds per build, gate, placement and usability check
