"""Where each operation of an Apple program will run, predicted on Linux from the saved program and the rules of
placement_rules.py; per program, the share of operations and FLOPs predicted on the Neural Engine and a verdict.

An operation is predicted on the Neural Engine unless a placement rule fires on it (then: the rule's fallback).
What decides the verdict is whether the work leaves the Neural Engine in the middle: an operation predicted
elsewhere that both reads from and feeds operations on the Neural Engine is a handoff (each costs a switch between
units, hollance/neural-engine docs/unsupported-layers.md), while operations before the first or after the last
Neural Engine operation (the embedding lookup, as in Apple's own ANE DistilBERT, placement_rules.APPLE_ANE_README)
are not.

Regions and boundaries: a region is a run of consecutive operations (program order) predicted on the Neural
Engine, a boundary each run off it between two regions. Core AI hands the Neural Engine one submission per region
(25 a pass against Core ML's one for the same encoder on an iPhone 17 Pro, john-rocky/coreai-model-zoo knowledge
notes), each costing at least the engine's per-call floor (~0.23 ms, arXiv 2606.22283); each operation that
leaves the Neural Engine costs a fixed 0.6-1.75 ms (apple/coreai-torch#66). The predicted added cost of a
function is therefore counted per region and per boundary, never per operation.

Verdicts, best first: "neural_engine" (one Neural Engine region, at most edges elsewhere), "split" (handoffs),
"off_neural_engine" (nothing predicted there), "may_fail" (a risk rule: the program may not run at all). A program
passes when it is "neural_engine"; cost rules are reported and never fail it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pocketbert.export.evaluators import placement_rules, program_view
from pocketbert.export.evaluators.placement_rules import NEURAL_ENGINE, PLACEMENT, RISK, Rule
from pocketbert.core.run.run_files import COREAI_ASSET_SUFFIX, COREML_PACKAGE_SUFFIX

VERDICTS = ("neural_engine", "split", "off_neural_engine", "may_fail")  # best first
NEURAL_ENGINE_VERDICT, SPLIT, OFF, MAY_FAIL = VERDICTS
EXAMPLES = 3  # operations named per fired rule
REGION_MS = 0.23  # the Neural Engine's per-call floor, one per Core AI submission (arXiv 2606.22283)
BOUNDARY_MS = (0.6, 1.75)  # each operation that leaves the Neural Engine (apple/coreai-torch#66)
SUBMITS_PER_REGION = {"Core AI": True, "Core ML": False}  # Core ML hands the engine one submission a pass
COMPILE_KILL_RISK = ("a Neural Engine compile that fails on the device lets the model load and kills the process at "
                     "its first prediction (apple/coremltools#2758): run the first prediction on each target device "
                     "(the device kit does) before shipping")


@dataclass
class OpPlacement:
    name: str
    op_type: str
    unit: str
    flops: int
    rules: list[str]
    handoff: bool = False  # predicted off the Neural Engine between Neural Engine arithmetic


@dataclass
class FiredRule:
    id: str
    effect: str
    description: str
    source: str
    ops: int
    examples: list[str]


@dataclass
class FunctionPlacement:
    function: str
    ops: int
    ops_on_neural_engine: int
    flops: int
    flops_on_neural_engine: int
    handoffs: int
    verdict: str
    fired: list[FiredRule]
    operations: list[OpPlacement] = field(repr=False, default_factory=list)
    regions: int = 0      # runs of consecutive Neural Engine operations
    boundaries: int = 0   # runs off the Neural Engine between two regions
    largest_table: int = 0  # rows of the largest gather table (the embedding lookup), 0 without one

    @property
    def share_ops(self) -> float:
        return self.ops_on_neural_engine / self.ops if self.ops else 0.0

    @property
    def share_flops(self) -> float:
        return self.flops_on_neural_engine / self.flops if self.flops else 0.0


@dataclass
class ProgramPlacement:
    program: str   # the file's name in the export folder
    format: str    # "Core ML" or "Core AI"
    functions: list[FunctionPlacement]

    @property
    def verdict(self) -> str:
        return max((f.verdict for f in self.functions), key=VERDICTS.index, default=OFF)

    @property
    def passes(self) -> bool:
        return self.verdict == NEURAL_ENGINE_VERDICT

    @property
    def fired(self) -> list[str]:
        return sorted({r.id for f in self.functions for r in f.fired})

    def _shares(self) -> tuple[float, float]:
        """Over all functions: one function per length, each weighed as a whole program."""
        ops = sum(f.ops for f in self.functions)
        flops = sum(f.flops for f in self.functions)
        return (sum(f.ops_on_neural_engine for f in self.functions) / ops if ops else 0.0,
                sum(f.flops_on_neural_engine for f in self.functions) / flops if flops else 0.0)

    @property
    def predicted_unit(self) -> str:
        """The unit a phone's latency row should assume: the Neural Engine only for a program that passes;
        otherwise the unit most of the work predicted off the Neural Engine falls back to."""
        if self.passes:
            return NEURAL_ENGINE
        off: dict[str, int] = {}
        for f in self.functions:
            for op in f.operations:
                if op.unit != NEURAL_ENGINE:
                    # "CPU or GPU": the floor of a phone row is the faster of the two
                    unit = placement_rules.GPU if op.unit == placement_rules.CPU_OR_GPU else op.unit
                    off[unit] = off.get(unit, 0) + max(op.flops, 1)
        return max(off, key=off.get) if off else placement_rules.CPU

    def added_cost_ms(self) -> tuple[float, float]:
        """The predicted cost of regions and boundaries over a single Neural Engine region, for the function that
        costs most (a prediction runs one function)."""
        per_region = REGION_MS if SUBMITS_PER_REGION[self.format] else 0.0
        costs = [((max(f.regions - 1, 0)) * per_region + f.boundaries * BOUNDARY_MS[0],
                  (max(f.regions - 1, 0)) * per_region + f.boundaries * BOUNDARY_MS[1]) for f in self.functions]
        return max(costs, default=(0.0, 0.0))

    def risks(self) -> list[str]:
        """Stated risks that no rule on the saved program can decide; each with its source."""
        return [COMPILE_KILL_RISK] if any(f.ops_on_neural_engine for f in self.functions) else []

    def summary(self) -> dict:
        """The verdict without the per-operation lists: for the manifest (where bench reads it:
        mobile_bench/estimates/placement_verdict.py), parity.json and READMEs."""
        share_ops, share_flops = self._shares()
        return {"format": self.format, "verdict": self.verdict, "passes": self.passes,
                "predicted_unit": self.predicted_unit,
                "neural_engine_op_share": round(share_ops, 4),
                "neural_engine_flop_share": round(share_flops, 4),
                "handoffs": sum(f.handoffs for f in self.functions), "functions": len(self.functions),
                "rules_fired": self._fired_counts(),
                "regions": max((f.regions for f in self.functions), default=0),
                "boundaries": max((f.boundaries for f in self.functions), default=0),
                "added_cost_ms": [round(c, 3) for c in self.added_cost_ms()],
                "axis_limit": axis_limit_note(max((f.largest_table for f in self.functions), default=0)),
                "risks": self.risks()}

    def _fired_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.functions:
            for r in f.fired:
                counts[r.id] = counts.get(r.id, 0) + r.ops
        return counts

    def to_dict(self) -> dict:
        functions = []
        for f in self.functions:
            row = asdict(f)
            row.update(share_ops=round(f.share_ops, 4), share_flops=round(f.share_flops, 4))
            functions.append(row)
        return {"program": self.program, **self.summary(), "functions": functions}


def predict(function: program_view.Function, rules: list[Rule] | None = None) -> FunctionPlacement:
    """Each operation's predicted unit and the function's verdict under `rules` (default: all of RULES)."""
    rules = placement_rules.RULES if rules is None else rules
    placed = []
    for op in function.ops:
        fired = [r for r in rules if r.fires(op, function)]
        moved = next((r.fallback for r in fired if r.effect == PLACEMENT), None)
        placed.append(OpPlacement(op.name, op.op_type, moved or NEURAL_ENGINE, op.flops, [r.id for r in fired]))
    handoffs = _mark_handoffs(function, placed)
    regions, boundaries = _regions(placed)
    on = [p for p in placed if p.unit == NEURAL_ENGINE]
    fired = [FiredRule(r.id, r.effect, r.description, r.source, len(hits), [p.name for p in hits[:EXAMPLES]])
             for r in rules if (hits := [p for p in placed if r.id in p.rules])]
    verdict = (MAY_FAIL if any(r.effect == RISK for r in fired) else OFF if not on
               else SPLIT if handoffs else NEURAL_ENGINE_VERDICT)
    return FunctionPlacement(function.name, len(placed), len(on), sum(p.flops for p in placed),
                             sum(p.flops for p in on), handoffs, verdict, fired, placed, regions, boundaries,
                             _largest_table(function))


def _regions(placed: list[OpPlacement]) -> tuple[int, int]:
    """(regions, boundaries) in program order: runs on the Neural Engine, and runs off it between two of them."""
    runs = []
    for p in placed:
        on = p.unit == NEURAL_ENGINE
        if not runs or runs[-1] != on:
            runs.append(on)
    regions = sum(runs)
    first, last = (runs.index(True), len(runs) - 1 - runs[::-1].index(True)) if regions else (0, -1)
    return regions, sum(1 for on in runs[first:last + 1] if not on)


def _largest_table(function: program_view.Function) -> int:
    rows = [op.reads[0].tensor.shape[int(op.attributes.get("axis", 0) or 0) if op.op_type == "gather" else 0] or 0
            for op in function.ops if op.op_type in ("gather", "gather_nd") and op.reads and op.reads[0].tensor.shape]
    return max(rows, default=0)


def axis_limit_note(rows: int) -> str:
    """What the Neural Engine's axis limit (16,384 through the A15, 65,536 from the A16) means for the program's
    largest lookup table, in the verdict's words."""
    older, newer = placement_rules.MAX_EXTENT, placement_rules.MAX_EXTENT_FROM_A16
    if rows == 0:
        return "no lookup table"
    if rows <= older:
        return (f"largest lookup table {rows:,} rows: within {older:,} (A15 and earlier) and {newer:,} (A16 on); "
                "a fitted vocabulary clears the axis limit")
    if rows <= newer:
        return (f"largest lookup table {rows:,} rows: above {older:,}, so the lookup leaves the Neural Engine on "
                f"the A15 and earlier; within {newer:,} from the A16 (fit the vocabulary to {older:,} rows or "
                "fewer to clear it everywhere)")
    return f"largest lookup table {rows:,} rows: above {newer:,}, off the Neural Engine on every chip"


def _mark_handoffs(function: program_view.Function, placed: list[OpPlacement]) -> int:
    """Mark each operation off the Neural Engine that has Neural Engine arithmetic both before it (an ancestor)
    and after it (a descendant); return the number of handoffs, each a connected group of such operations (a
    round trip off the Neural Engine and back). Layout operations (no FLOPs) go where their neighbours go, so
    they alone do not make work on the Neural Engine."""
    producers = function.producers
    parents = [[producers[r.name] for r in op.computed_reads if r.name in producers] for op in function.ops]
    work = [p.unit == NEURAL_ENGINE and p.flops > 0 for p in placed]
    before = [False] * len(placed)
    for i, sources in enumerate(parents):  # program order is a topological order
        before[i] = any(work[j] or before[j] for j in sources)
    after = [False] * len(placed)
    for i in reversed(range(len(placed))):
        if work[i] or after[i]:
            for j in parents[i]:
                after[j] = True
    group = {}
    for i, p in enumerate(placed):
        p.handoff = p.unit != NEURAL_ENGINE and before[i] and after[i]
        if p.handoff:  # joins the group of an off-engine parent it reads from, or starts one
            joined = {group[j] for j in parents[i] if j in group}
            group[i] = min(joined, default=i)
            for k, g in group.items():
                if g in joined:
                    group[k] = group[i]
    return len(set(group.values()))


# The formats, by how the file's name ends: (format, reader).
READERS = {COREML_PACKAGE_SUFFIX: ("Core ML", program_view.read_mlpackage),
           COREAI_ASSET_SUFFIX: ("Core AI", program_view.read_aimodel)}


def check(path: Path, rules: list[Rule] | None = None) -> ProgramPlacement:
    """The placement check of one saved Apple program (.mlpackage or .aimodel)."""
    path = Path(path)
    form, read = READERS[path.suffix]
    return ProgramPlacement(path.name, form, [predict(f, rules) for f in read(path)])


def is_apple_program(path: Path) -> bool:
    return Path(path).suffix in READERS


def check_all(paths: list[Path]) -> dict[str, ProgramPlacement]:
    """The placement check of each Apple program among `paths` (other files are left out), by file name."""
    return {Path(p).name: check(p) for p in paths if is_apple_program(p)}


def readme_table(summaries: dict[str, dict], shipped: str | None = None) -> list[str]:
    """The README lines of the export's placement verdicts (program -> summary()); `shipped` marks the program
    the folder holds. Programs are named as the export folder names them, without backticks: a README's
    backticked first column lists the folder's own files."""
    lines = ["", "Where each Apple program of the export is predicted to run (pocketbert's placement check, read "
             "from the saved program on Linux, rules and sources in docs/placement.md; a prediction, not a "
             "measurement):", "", "| program | verdict | ops / FLOPs on the Neural Engine | rules that fired |",
             "|---|---|---|---|"]
    for name, s in summaries.items():
        rules = ", ".join(f"{k} ({n})" for k, n in s["rules_fired"].items()) or "none"
        mark = " (this folder's)" if name == shipped else ""
        lines.append(f"| {name}{mark} | {s['verdict'].replace('_', ' ')} | {s['neural_engine_op_share']:.0%} / "
                     f"{s['neural_engine_flop_share']:.0%} | {rules} |")
    return lines

