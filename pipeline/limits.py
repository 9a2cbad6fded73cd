"""Limits found by bisection: the largest value of a server setting that boots and answers,
bracketed between a known-good and a known-bad bound with the number of boots capped.

A search names the setting (``max_model_len`` or ``max_num_seqs``), the other setting's value it holds (``at``;
default the base config's), a known-good and a known-bad bound, the precision it stops at and its boot budget.
It probes the good bound first (if that fails the search stops: the bound was not good), then the bad bound (if
that boots the limit is above it: said so, no bracket), then bisects until ``bad - good <= precision`` or the
budget is spent. Each probe is a server boot (a compile on Neuron: the plan states the budget's cost). The answer
is a bracket ``(good, bad]`` with the bad bound's classified error, and every probe.

One rule set serves both limits lanes: the ``limits`` lane searches the serving settings (:data:`SERVING_KINDS`:
each probe a server boot), the ``train_limits`` lane the training sequence length (``train_seq_len`` at a
per-device ``batch_size``: each probe a short training run, a compile of the training graph on trn1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.lane_configs.bounds import BATCH, MAX_MODEL_LEN, MAX_NUM_SEQS, PROBES, SEQ_LEN
from pipeline.spec_types import Refusal, check_of, checked, first_refusal

SERVING_KINDS = ("max_model_len", "max_num_seqs")
TRAINING_KINDS = ("train_seq_len",)
KINDS = SERVING_KINDS + TRAINING_KINDS
OTHER = {"max_model_len": "max_num_seqs", "max_num_seqs": "max_model_len", "train_seq_len": "batch_size"}
# what a probe is, and what it did, per kind: (probe noun, it worked, it did not)
WORDS = {
    "max_model_len": ("boot", "booted", "did not boot"),
    "max_num_seqs": ("boot", "booted", "did not boot"),
    "train_seq_len": ("probe", "trained", "did not train"),
}
_FIELDS = ("kind", "good", "bad", "at", "precision", "max_boots")
MAX_BOOTS = PROBES["max"]
# the most each setting may be searched up to (a server config's own bounds; Llama 3.1's context for training)
MOST = {
    "max_model_len": MAX_MODEL_LEN["max"],
    "max_num_seqs": MAX_NUM_SEQS["max"],
    "train_seq_len": SEQ_LEN["max"],
    "batch_size": BATCH["max"],
}


class LimitSearchError(ValueError):
    """A limits search that cannot run: ``searches[i].FIELD: reason``."""


@dataclass(frozen=True)
class Ceiling:
    """The most a searched value may be, and what says so (a model's ``max_position_embeddings``)."""

    value: int
    source: str


@dataclass(frozen=True)
class LimitSearch:
    kind: str
    good: int
    bad: int
    at: int | None = None  # the other setting's value; None: the base config's
    precision: int = 1  # stop when bad - good <= precision
    max_boots: int = 8

    def label(self, at: int) -> str:
        return f"{self.kind} at {OTHER[self.kind]}={at}"


def _at_least(lo: int) -> Any:
    """A field's check: an integer of at least ``lo`` (null: not given)."""

    def check(v: Any) -> Any:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
            raise Refusal(f"an integer >= {lo}, got {v!r}")
        return v

    return checked(check)


def _bound(lo: int) -> Any:
    """A known-good or known-bad bound: required, an integer of at least ``lo``."""
    at_least = check_of(_at_least(lo))

    def check(v: Any, info: ValidationInfo) -> Any:
        if v is None:
            raise Refusal(f"required (a known-{info.field_name} bound)")
        return at_least(v)

    return Annotated[Any, PlainValidator(check)]


GoodBound = _bound(1)
BadBound = _bound(2)
PositiveOrUnset = _at_least(1)
Probes = _at_least(PROBES["min"])


class SearchSpec(BaseModel):
    """One search of a limits lane's ``searches``, checked in this order (the first problem is the refusal);
    validated with the context ``{"kinds": the kinds this lane searches, "max_boots": the lane's default boot
    budget, "ceiling": a Ceiling or None}``."""

    model_config = ConfigDict(extra="forbid")

    kind: Any = Field(None, validate_default=True)
    good: GoodBound = Field(None, validate_default=True)
    bad: BadBound = Field(None, validate_default=True)
    at: PositiveOrUnset = None
    precision: PositiveOrUnset = 1
    max_boots: Probes = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, s: Any, info: ValidationInfo) -> Any:
        if not isinstance(s, dict):
            raise Refusal(f"an object with {', '.join(_FIELDS)}, got {type(s).__name__}")
        unknown = sorted(set(s) - set(_FIELDS))
        if unknown:
            raise Refusal(f"unknown field; a search takes {', '.join(_FIELDS)}", unknown[0])
        return {"max_boots": info.context["max_boots"], **s}

    @field_validator("kind")
    @classmethod
    def _kind(cls, kind: Any, info: ValidationInfo) -> Any:
        kinds = info.context["kinds"]
        if kind not in kinds:
            raise Refusal(f"one of {', '.join(kinds)}, got {kind!r}")
        return kind

    @model_validator(mode="after")
    def _bracket(self, info: ValidationInfo) -> SearchSpec:
        if self.bad <= self.good:
            raise Refusal(f"the known-bad bound must be above the known-good one ({self.good}), got {self.bad}", "bad")
        ceiling = info.context["ceiling"]
        for key in ("good", "bad"):
            if ceiling is not None and getattr(self, key) > ceiling.value:
                raise Refusal(f"at most {ceiling.value} ({ceiling.source}), got {getattr(self, key)}", key)
        for key, setting in (("good", self.kind), ("bad", self.kind), ("at", OTHER[self.kind])):
            value = getattr(self, key)
            if value is not None and value > MOST[setting]:
                raise Refusal(f"at most {MOST[setting]:,} (the most {setting} may be), got {value:,}", key)
        if self.precision > self.bad - self.good:
            raise Refusal(
                f"at most {self.bad - self.good:,} (bad - good: the bracket it starts from), got {self.precision:,}",
                "precision",
            )
        if self.max_boots > MAX_BOOTS:
            raise Refusal(
                f"at most {MAX_BOOTS} {WORDS[self.kind][0]}s (each is a compile on a box), got {self.max_boots}",
                "max_boots",
            )
        return self

    def search(self) -> LimitSearch:
        return LimitSearch(
            kind=self.kind, good=self.good, bad=self.bad, at=self.at, precision=self.precision, max_boots=self.max_boots
        )


def check_searches(
    spec: Any, default_max_boots: int = 8, kinds: tuple[str, ...] = SERVING_KINDS, ceiling: Ceiling | None = None
) -> list[LimitSearch]:
    """The searches of a limits lane's config (of ``kinds``), each checked; LimitSearchError on the first thing
    wrong. With a ``ceiling``, a bound above it is refused (a sequence longer than the model's positions)."""
    if not isinstance(spec, list):
        raise LimitSearchError(f"searches: a list of searches, got {type(spec).__name__}")
    out = []
    context = {"kinds": kinds, "max_boots": default_max_boots, "ceiling": ceiling}
    for i, s in enumerate(spec):
        where = f"searches[{i}]"
        try:
            search = SearchSpec.model_validate(s, context=context).search()
        except ValidationError as exc:
            raise LimitSearchError(first_refusal(exc, where)) from None
        same = next((j for j, o in enumerate(out) if (o.kind, o.at) == (search.kind, search.at)), None)
        if same is not None:
            at = (
                f"{OTHER[search.kind]}={search.at}"
                if search.at is not None
                else f"the base config's {OTHER[search.kind]}"
            )
            raise LimitSearchError(f"{where}: searches {search.kind} at {at} again (searches[{same}])")
        out.append(search)
    return out


def search_columns(search: LimitSearch, search_id: str, model: str, at: int, backend: str) -> dict[str, Any]:
    """The ``limit_probes`` columns every row of one search carries (the rest NULL on its outcome row)."""
    return {
        "search_id": search_id,
        "model": model,
        "kind": search.kind,
        "at_field": OTHER[search.kind],
        "at_value": at,
        "good": search.good,
        "bad": search.bad,
        "precision": search.precision,
        "max_boots": search.max_boots,
        "backend": backend,
    }


@dataclass(frozen=True)
class Probe:
    value: int
    phase: str  # good | bad | bisect
    ok: bool
    error_kind: str | None = None
    error: str | None = None


@dataclass
class Bisection:
    """The search's state: ask :meth:`next` for the value to probe, :meth:`record` its outcome."""

    search: LimitSearch
    probes: list[Probe] = field(default_factory=list)
    low: int | None = None  # the largest value that booted and answered
    high: int | None = None  # the smallest value that did not
    stop_reason: str | None = None

    def next(self) -> int | None:
        if self.stop_reason is not None:
            return None
        s = self.search
        if not self.probes:
            return s.good
        if len(self.probes) == 1:
            return s.bad
        assert self.low is not None and self.high is not None
        if self.high - self.low <= s.precision:
            self.stop_reason = f"bracket within the precision {s.precision}"
            return None
        if len(self.probes) >= s.max_boots:
            noun = WORDS[s.kind][0]
            self.stop_reason = f"{noun} budget spent ({s.max_boots} {noun}s)"
            return None
        mid = self.low + (self.high - self.low) // 2
        if s.precision > 1:  # probe on the precision's grid, strictly inside the bracket
            mid = max(self.low + 1, min(self.high - 1, mid - mid % s.precision or mid))
        return mid

    def record(self, value: int, ok: bool, error_kind: str | None = None, error: str | None = None) -> None:
        phase = "good" if not self.probes else "bad" if len(self.probes) == 1 else "bisect"
        self.probes.append(Probe(value, phase, ok, error_kind, error))
        _, worked, failed = WORDS[self.search.kind]
        if phase == "good" and not ok:
            self.stop_reason = f"the known-good bound {value} {failed}: no bracket"
            return
        if phase == "bad" and ok:
            self.low = value
            self.stop_reason = f"the known-bad bound {value} {worked}: the limit is above it"
            return
        if ok:
            self.low = value if self.low is None else max(self.low, value)
        else:
            self.high = value if self.high is None else min(self.high, value)

    @property
    def failure(self) -> Probe | None:
        """The probe at the bracket's upper end: the cliff's error."""
        return next((p for p in self.probes if not p.ok and p.value == self.high), None)
