"""The placement check's verdict per Apple program, as bench reads it from the export manifest.

The export's placement check (export/evaluators/placement.py) predicts, for each Core ML and Core AI program,
where its operations will run. Bench reads its verdicts from the export manifest's metrics (a file, never the
export's code) and applies a phone's Neural Engine row only to a program predicted on the Neural Engine; a
program predicted elsewhere gets the unit it falls back to, and a program with no verdict is reported as
unchecked, never assumed on the Neural Engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pocketbert.core.run.stage_records import ExportRecord

NEURAL_ENGINE = "neural_engine"
UNITS = ("neural_engine", "gpu", "cpu")
UNCHECKED = "unchecked"


@dataclass(frozen=True)
class PlacementVerdict:
    program: str  # the program's file name in the export folder (X.mlpackage, X.aimodel)
    predicted_unit: str  # neural_engine, gpu or cpu: where most of its FLOPs are predicted to run
    neural_engine_op_share: float  # of its operations, the share predicted on the Neural Engine
    neural_engine_flop_share: float  # of its FLOPs, the same
    rules_fired: tuple[str, ...] = field(default_factory=tuple)
    # None where the manifest does not record them
    regions: int | None = None        # runs of consecutive Neural Engine operations
    boundaries: int | None = None     # runs off the Neural Engine between two regions
    added_cost_ms: tuple[float, float] | None = None  # predicted cost of regions and boundaries, low-high
    axis_limit: str | None = None     # what the axis limit by chip generation means for its lookup table
    risks: tuple[str, ...] = field(default_factory=tuple)  # stated risks with their sources

    def to_dict(self) -> dict:
        return {**asdict(self), "rules_fired": list(self.rules_fired), "risks": list(self.risks),
                "added_cost_ms": list(self.added_cost_ms) if self.added_cost_ms else None}

    @classmethod
    def from_dict(cls, program: str, raw: dict) -> PlacementVerdict | None:
        """A verdict as the manifest records it; None where it is not one (bench then says 'unchecked')."""
        if not isinstance(raw, dict) or raw.get("predicted_unit") not in UNITS:
            return None
        try:
            ops, flops = float(raw.get("neural_engine_op_share")), float(raw.get("neural_engine_flop_share"))
        except (TypeError, ValueError):
            return None
        if not (0.0 <= ops <= 1.0 and 0.0 <= flops <= 1.0):
            return None
        rules = raw.get("rules_fired") or []  # the export records {rule: operations it fired on}
        cost = raw.get("added_cost_ms")
        cost = (float(cost[0]), float(cost[1])) if isinstance(cost, list) and len(cost) == 2 else None
        counts = [raw.get(k) if isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool) else None
                  for k in ("regions", "boundaries")]
        risks = raw.get("risks") if isinstance(raw.get("risks"), list) else []
        return cls(program, raw["predicted_unit"], ops, flops,
                   tuple(str(r) for r in rules) if isinstance(rules, (list, dict)) else (), counts[0], counts[1],
                   cost, str(raw["axis_limit"]) if raw.get("axis_limit") else None, tuple(str(r) for r in risks))


def verdicts_from_manifest(manifest: ExportRecord) -> dict[str, dict]:
    """{program: verdict dict} for every well-formed verdict the export manifest records (none: {})."""
    recorded = manifest.metrics.placement
    if recorded is None:
        return {}
    verdicts = (PlacementVerdict.from_dict(name, raw) for name, raw in recorded.items())
    return {v.program: v.to_dict() for v in verdicts if v is not None}


def unit_for(requested_unit: str, verdict: dict | None) -> tuple[str, str]:
    """(the unit whose floor applies, the placement status) for a phone row of `requested_unit`.

    Only the Neural Engine depends on the program: Core ML and Core AI can always run on the CPU and GPU."""
    if requested_unit != NEURAL_ENGINE:
        return requested_unit, "not needed"
    if verdict is None:
        return requested_unit, UNCHECKED
    if verdict["predicted_unit"] == NEURAL_ENGINE:
        return requested_unit, f"checked: predicted on the Neural Engine ({100 * verdict['neural_engine_flop_share']:.0f} % of FLOPs)"
    return verdict["predicted_unit"], (f"checked: falls back to the {verdict['predicted_unit'].upper()} "
                                       f"({', '.join(verdict['rules_fired']) or 'no rule named'})")
