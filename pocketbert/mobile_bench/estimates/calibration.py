"""Calibration of roofline floors against published device measurements (calibration.yaml).

For each published point with a device profile, a stated sequence length and a complete shape, pocketbert
computes the floor from the shape alone (model_shape) on the profile (roofline), and measured / floor is that
point's factor. Factors pool per (device family, compute unit, precision) over the steady and burst points: the
calibrated estimate of a floor is floor × the geometric mean of its key's factors.

The calibration is tested, not fitted: each point is predicted from the others (leave-one-out: its key's factor
fitted without it and without any point of the same source on the same device), and its error is printed beside
it. The estimate's range is that leave-one-out spread: the smallest and largest measured / predicted of the key's
points. A key with no point gives no estimate: the report then shows the floor alone; a key whose points cannot
predict each other gives an estimate without a range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from importlib import resources

import yaml

from pocketbert.core.errors import ConfigError
from pocketbert.mobile_bench.estimates import roofline
from pocketbert.mobile_bench.estimates.profiles import APPLE_FAMILY
from pocketbert.mobile_bench.estimates.model_shape import SHAPE_KINDS

CALIBRATION_FILE = "calibration.yaml"
REQUIRED = ("id", "model", "device", "device_name", "family", "compute_unit", "precision", "runtime",
            "sequence_length", "batch", "shape", "measured_ms", "source", "read")
REGIMES = ("steady", "burst", "sustained")
FITTED_REGIMES = ("steady", "burst")  # warm predictions before any sustained slowdown: what the factors fit
APPLE_TARGET = 0.30  # every Apple point's leave-one-out error should be within ±30 % (reported, never tuned)

@dataclass(frozen=True)
class CalibrationKey:
    family: str
    compute_unit: str
    precision: str

    def text(self) -> str:
        return f"{self.family} / {self.compute_unit} / {self.precision}"


@dataclass
class CalibrationFactor:
    """measured / floor pooled over a key's points: geometric mean, smallest, largest, how many, which."""

    family: str
    compute_unit: str
    precision: str
    factor: float
    low: float | None   # the factor times the smallest measured / predicted (leave-one-out); None: no spread
    high: float | None
    points: int
    ids: list[str]

    def to_dict(self) -> dict:
        return asdict(self)


def _load() -> dict:
    return yaml.safe_load(resources.files("pocketbert.mobile_bench.estimates").joinpath(CALIBRATION_FILE).read_text()) or {}


def load_regimes() -> dict:
    """The published cold-start and sustained factors (calibration.yaml's regimes), each with its source."""
    regimes = _load().get("regimes") or {}
    for name, regime in regimes.items():
        if not str(regime.get("source", "")).startswith("http"):
            raise ConfigError(f"{CALIBRATION_FILE}: regime {name} must cite its source by address")
    return regimes


def load_points() -> list[dict]:
    points = _load().get("points") or []
    for i, point in enumerate(points):
        missing = [k for k in REQUIRED if k not in point]
        if missing:
            raise ConfigError(f"{CALIBRATION_FILE}: point {point.get('id', i)} lacks {', '.join(missing)}")
        if not str(point["source"]).startswith("http"):
            raise ConfigError(f"{CALIBRATION_FILE}: point {point['id']} must cite its source by address")
        if point["shape"].get("kind") not in SHAPE_KINDS:
            raise ConfigError(f"{CALIBRATION_FILE}: point {point['id']}: shape kind must be one of "
                              f"{', '.join(SHAPE_KINDS)}")
        if point.setdefault("regime", "steady") not in REGIMES:
            raise ConfigError(f"{CALIBRATION_FILE}: point {point['id']}: regime must be one of {', '.join(REGIMES)}")
        if not isinstance(point["measured_ms"], (int, float)) or point["measured_ms"] <= 0:
            raise ConfigError(f"{CALIBRATION_FILE}: point {point['id']}: measured_ms must be a positive number")
    return points


def shape_of(point: dict):
    """The point's model shape, or None where a field the floor needs is not published."""
    fields = {k: v for k, v in point["shape"].items() if k != "kind"}
    if any(v is None for v in fields.values()):
        return None
    return SHAPE_KINDS[point["shape"]["kind"]](**fields)


def why_no_floor(point: dict, profiles: dict) -> str | None:
    if point["sequence_length"] is None:
        return "the source does not state the sequence length"
    if shape_of(point) is None:
        unknown = [k for k, v in point["shape"].items() if v is None]
        return f"the source does not give the model's {', '.join(unknown)}"
    profile = profiles.get(point["device"])
    if profile is None:
        return "no device profile (its peak rates are not published)"
    if point["compute_unit"] not in profile["compute"] \
            or point["precision"] not in profile["compute"][point["compute_unit"]]:
        return f"the profile has no {point['compute_unit']} {point['precision']} peak"
    return None


def point_floor(point: dict, profile: dict) -> dict:
    """The roofline floor of a published point, from the model's shape alone on its device's profile."""
    cost = shape_of(point).cost(point["sequence_length"], point["batch"])
    peak = profile["compute"][point["compute_unit"]][point["precision"]]["peak_gflops"]
    weights = cost["weight_bytes"]["fp32"] * roofline.WEIGHT_BYTES_FACTOR[point["precision"]]
    return {"flops": cost["flops"], "bytes": weights + cost["io_bytes"],
            **roofline.roofline_floor(cost["flops"], weights + cost["io_bytes"], peak,
                                      profile["memory_bandwidth_gbs"]["value"])}


def calibration_rows(points: list[dict], profiles: dict) -> list[dict]:
    """Every point with its floor and factor, or the reason it has none."""
    rows = []
    for point in points:
        reason = why_no_floor(point, profiles)
        floor = None if reason else point_floor(point, profiles[point["device"]])
        rows.append({**{k: point[k] for k in REQUIRED if k != "shape"},
                     "regime": point["regime"], "soc_class": point.get("soc_class"),
                     "shape": describe_shape(point), "shape_fields": dict(point["shape"]), "quote": point.get("quote"),
                     "floor_ms": floor["floor_ms"] if floor else None, "bound": floor["bound"] if floor else None,
                     "gflops": floor["flops"] / 1e9 if floor else None,
                     "factor": point["measured_ms"] / floor["floor_ms"] if floor else None,
                     "no_floor_because": reason})
    return rows


def describe_shape(point: dict) -> str:
    shape = shape_of(point)
    if shape is not None:
        return shape.describe()
    return ", ".join(f"{k} {'?' if v is None else v}" for k, v in point["shape"].items() if k != "kind")


def _key(row: dict) -> CalibrationKey:
    return CalibrationKey(row["family"], row["compute_unit"], row["precision"])


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def leave_one_out(rows: list[dict]) -> None:
    """Each fitted point predicted from the others of its key, leaving out every point of its source on its device;
    adds predicted_ms, loo_error (predicted / measured - 1), loo_points and loo_none_because to each row."""
    for row in rows:
        others = [o for o in rows if o is not row and o["factor"] is not None and o["regime"] in FITTED_REGIMES
                  and _key(o) == _key(row) and (o["source"], o["device"]) != (row["source"], row["device"])]
        reason = (f"no floor: {row['no_floor_because']}" if row["factor"] is None
                  else "a sustained point sets the sustained factor; it is not fitted" if row["regime"] not in
                  FITTED_REGIMES else None if others else "no other source on another device shares its key")
        predicted = None if reason else row["floor_ms"] * _geometric_mean([o["factor"] for o in others])
        row.update(predicted_ms=predicted, loo_points=[o["id"] for o in others] if not reason else [],
                   loo_error=None if reason else predicted / row["measured_ms"] - 1, loo_none_because=reason)


def pooled_factors(rows: list[dict]) -> list[CalibrationFactor]:
    by_key: dict[CalibrationKey, list[dict]] = {}
    for row in rows:
        if row["factor"] is not None and row["regime"] in FITTED_REGIMES:
            by_key.setdefault(CalibrationKey(row["family"], row["compute_unit"], row["precision"]), []).append(row)
    out = []
    for key, members in sorted(by_key.items(), key=lambda kv: kv[0].text()):
        geometric = _geometric_mean([r["factor"] for r in members])
        # the leave-one-out spread: measured / predicted of each point the others could predict
        ratios = [r["measured_ms"] / r["predicted_ms"] for r in members if r.get("predicted_ms")]
        out.append(CalibrationFactor(key.family, key.compute_unit, key.precision, geometric,
                                     geometric * min(ratios) if ratios else None,
                                     geometric * max(ratios) if ratios else None, len(members),
                                     [r["id"] for r in members]))
    return out


def apple_misses(rows: list[dict]) -> list[dict]:
    """The Apple points whose leave-one-out error is beyond APPLE_TARGET."""
    return [r for r in rows if r["family"] == APPLE_FAMILY and r.get("loo_error") is not None
            and abs(r["loo_error"]) > APPLE_TARGET]


def calibration_table(profiles: dict) -> dict:
    """The table `bench calibration` prints and bench records in results.json: points and pooled factors."""
    rows = calibration_rows(load_points(), profiles)
    leave_one_out(rows)
    return {"points": rows, "factors": [f.to_dict() for f in pooled_factors(rows)], "regimes": load_regimes(),
            "apple_target": APPLE_TARGET, "apple_misses": [r["id"] for r in apple_misses(rows)]}


def calibrate(floor_ms: float, family: str | None, compute_unit: str, precision: str,
              factors: list[dict]) -> dict:
    """The calibrated estimate of one floor, with its spread and the points behind it; None values where no
    published point shares the key."""
    match = next((f for f in factors if (f["family"], f["compute_unit"], f["precision"])
                  == (family, compute_unit, precision)), None)
    if match is None:
        return {"calibrated_ms": None, "calibrated_low_ms": None, "calibrated_high_ms": None,
                "calibration_points": 0, "calibration_ids": []}
    spread = match["low"] is not None
    return {"calibrated_ms": floor_ms * match["factor"],
            "calibrated_low_ms": floor_ms * match["low"] if spread else None,
            "calibrated_high_ms": floor_ms * match["high"] if spread else None,
            "calibration_points": match["points"], "calibration_ids": match["ids"]}
