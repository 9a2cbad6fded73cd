"""The plan's expected timetable: per box when it runs which lanes, the critical path, wall time, box-hours and
dollars — for the graph (boxes at once, waves) and for the sequential order (trn1's lanes, then
inf2's), so the saving is visible before anything is spent.

Expected lane durations, per lane: **history** where the results store's ``lane_runs`` has some (the rule is
:mod:`control_plane.lane_history`'s: the median of the last 5 matching attempts, same lane/model/config/instance
type first), else the **default**: a serving lane of the full profile from its box's backend family and the
server configs and models it declares (:func:`serve_default`: per (model, config) a boot of the family,
:data:`BOOT_COSTS_S`, plus the lane's work, :data:`SERVE_WORK`), any other lane from :data:`DEFAULT_DURATIONS_S`
(documented in ``docs/explanation/planning.md``, "Default durations").

The timetable is a model of the state machine: a wave starts when every segment of the previous wave has ended;
in a wave every box runs its segment at once; a segment is start + registration + harness sync
(:data:`SEGMENT_OVERHEAD_S`), its lanes one after another, then the stop. A box is billed only while one of its
segments runs (it is stopped between segments). These are expectations, not bounds: the cost ceiling is checked
against the timeouts (the plan's worst case), never against this timetable.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from control_plane.lane_history import Attempt, LaneKey, attempts, history_estimate
from pipeline.decision_choice import LIFECYCLE_ANCHORS
from pipeline.graph import Node

# Start (about 1 min for trn1/inf2 from stopped), SSM agent registration (~1 min) and the harness sync
# (~2 min: a zip from S3 and a pip install without dependencies), plus the stop: an estimate, to be replaced by
# measured figures from the first paid runs.
SEGMENT_OVERHEAD_S = 300.0
STOP_S = 30.0  # stopping a box (EBS-backed, from running): an estimate added to measured boots

ANCHOR = "anchor"  # the predecessor harness (torchneuronx): its published timings on trn1.2xlarge / inf2.xlarge
ESTIMATE = "estimate"  # no published timing: our estimate, to be replaced by the first paid run's history
REHEARSAL = "rehearsal"  # the tiny-profile rehearsal on a 2-core CPU VM, 2026-11-29
SOURCES = {
    ANCHOR: "the predecessor harness (torchneuronx): its published timings on trn1.2xlarge / inf2.xlarge",
    ESTIMATE: "no published timing: an estimate until a paid run's history replaces it",
    REHEARSAL: "measured in the tiny-profile rehearsal on a 2-core CPU VM (2026-11-29)",
}

# (profile, lane) -> (expected seconds, source). Full profile: two 8B models (Llama 3.1, Qwen3), two server configs;
# its serving lanes are not here but :func:`serve_default`'s (added below, on the pinned Neuron box).
DEFAULT_DURATIONS_S: dict[tuple[str, str], tuple[float, str]] = {
    ("full", "provenance"): (60.0, ESTIMATE),
    ("full", "preflight"): (60.0, ESTIMATE + ": files, CLIs and two HEADs; a pinned install on trn1 adds minutes"),
    ("full", "host_cpu"): (300.0, ESTIMATE),
    ("full", "smoke"): (900.0, ESTIMATE + ": tiny model, compile included"),
    ("full", "precompile"): (2400.0, ESTIMATE + ": two training graphs, cold then warm"),
    ("full", "nki"): (
        900.0,
        ANCHOR + ": nki.simulate of a 128x512 row softmax took 1.04 s; per shape set (five bundled) an estimated "
        "60 s compile each for the kernel and its torch reference, and 2 x 1,000 timed calls",
    ),
    ("full", "sft"): (16920.0, ANCHOR + ": LoRA SFT 2.0 h (Llama 3.1 8B) + 2.7 h (Qwen3 8B)"),
    ("full", "merge"): (1200.0, ESTIMATE + ": two merges, hashes, 2 x 16 GB upload"),
    ("full", "limits"): (
        120.0,
        ESTIMATE + ": no search by default (skipped); a declared search costs its boot "
        "budget, a cold compile per probe (the plan's server configs table)",
    ),
    ("full", "train_limits"): (
        9000.0,
        ANCHOR + ": six probes of a Llama 3.1 8B training-graph compile, 1,500 s each (TRAIN_PROBE_COSTS_S)",
    ),
    ("full", "from_scratch"): (
        330.0,
        ANCHOR + ": MLP, CNN and ViT on MNIST-sized images on one NeuronCore, 23.6 + 50.8 + 236.9 s (its ViT ran "
        "10 epochs, ours 5), the set's generation added",
    ),
    ("full", "rag"): (
        3600.0,
        ANCHOR + ": the embedder's trace 571 s and the reranker's 909 s (Qwen3-Embedding / Reranker 0.6B), the 8B "
        "server's cold boot about 1,900 s, the ingest at 1.5 chunks/s; the probes and four load levels an estimate",
    ),
    ("tiny", "from_scratch"): (5.0, "measured: three tiny models on generated 16x16 images, 2-core VM (2026-12-07)"),
    ("full", "encode"): (
        900.0,
        ANCHOR + ": Whisper-small's encoder and decoder compile took 157.6 s on a NeuronCore (load 2.7 s); the full "
        "profile's five models, each traced per batch size and shape, an estimated 900 s with their timed calls",
    ),
    ("tiny", "encode"): (12.0, "measured: four tiny encoder workloads on a shared 2-core VM (2026-12-07)"),
    ("tiny", "rag"): (25.0, "measured: the tiny rag lane, 17-38 s on a shared 2-core VM (2026-12-07)"),
    ("tiny", "provenance"): (0.4, REHEARSAL),
    ("tiny", "preflight"): (1.0, "measured: the CPU checks on a 2-core VM (2026-12-01)"),
    ("tiny", "host_cpu"): (4.5, REHEARSAL),
    ("tiny", "smoke"): (12.0, REHEARSAL),
    ("tiny", "precompile"): (0.1, REHEARSAL + " (skipped on CPU)"),
    ("tiny", "nki"): (
        0.2,
        "measured: the bundled specs read, then skipped (no NKI package) on a 2-core VM (2026-12-07)",
    ),
    ("tiny", "sft"): (17.5, REHEARSAL),
    ("tiny", "merge"): (7.5, REHEARSAL),
    ("tiny", "serve_sweep"): (29.3, REHEARSAL),
    ("tiny", "sustained"): (34.1, REHEARSAL),
    ("tiny", "limits"): (47.0, "measured: eight probes of the CPU server under its memory cap (2026-12-01)"),
    ("tiny", "train_limits"): (36.0, "measured: five CPU training probes under the lane's memory cap (2026-12-01)"),
    ("tiny", "capacity"): (45.0, ESTIMATE + ": boot + a 30 s search budget"),
    ("tiny", "quality"): (18.5, REHEARSAL),
    ("tiny", "finetune_serve"): (28.0, REHEARSAL),
    ("tiny", "qwen3_attempt"): (24.0, REHEARSAL),
}
UNKNOWN_DURATION_S = 600.0  # a lane with no history and no default (an extra lane): said so


@dataclass(frozen=True)
class Expected:
    seconds: float
    source: str  # "history (n=3, trn1.2xlarge)" | "history, other host (n=1, local)" | "default: ..."


@dataclass
class Segment:
    box: str
    wave: int
    start_s: float
    end_s: float
    lanes: list[tuple[str, float, float]]  # (result lane, start, end)

    @property
    def hours(self) -> float:
        return (self.end_s - self.start_s) / 3600.0


@dataclass
class Timetable:
    name: str
    segments: list[Segment]
    prices: Mapping[str, float]  # box -> USD per hour
    critical_path: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return max((s.end_s for s in self.segments), default=0.0)

    @property
    def box_hours(self) -> float:
        return sum(s.hours for s in self.segments)

    @property
    def cost_usd(self) -> float:
        return sum(s.hours * self.prices.get(s.box, 0.0) for s in self.segments)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "wall_s": round(self.wall_s, 1),
            "box_hours": round(self.box_hours, 3),
            "cost_usd": round(self.cost_usd, 2),
            "critical_path": self.critical_path,
            "segments": [
                {
                    "box": s.box,
                    "wave": s.wave,
                    "start_s": round(s.start_s, 1),
                    "end_s": round(s.end_s, 1),
                    "lanes": [lane for lane, _, _ in s.lanes],
                }
                for s in self.segments
            ],
        }


def history_durations(rows: Iterable[Mapping[str, Any]]) -> list[Attempt]:
    """The lane_runs rows the history rule reads (succeeded attempts that ran), each with its models and
    server-config fingerprints where its ``config_json`` says (:mod:`control_plane.lane_history`)."""
    return attempts(rows)


def segment_overhead(boots: Iterable[Mapping[str, Any]]) -> Expected:
    """A segment's fixed cost: measured from ``box_boots`` rows where boots were recorded (median of start
    requested → cache seeded, plus the median push), else :data:`SEGMENT_OVERHEAD_S`."""
    spans, pushes = [], []
    for r in boots:
        start, seeded = r.get("start_requested_at"), r.get("cache_seeded_at")
        if start is not None and seeded is not None and seeded >= start:
            spans.append((seeded - start).total_seconds())
        if r.get("push_s") is not None:
            pushes.append(float(r["push_s"]))
    if not spans:
        return Expected(SEGMENT_OVERHEAD_S, "default: " + ESTIMATE + " (start, registration, sync, stop)")
    push = statistics.median(pushes) if pushes else 0.0
    return Expected(
        statistics.median(spans) + push + STOP_S,
        f"history: {len(spans)} boot(s), start → cache seeded + push + {STOP_S:.0f} s stop",
    )


def expected_duration(
    lane: str,
    profile: str,
    instance_type: str | None,
    history: Sequence[Attempt],
    *,
    models: tuple[str, ...] | None = None,
    fingerprints: tuple[str, ...] | None = None,
    default: tuple[float, str] | None = None,
) -> Expected:
    """History by its rule (:func:`control_plane.lane_history.history_estimate`), else ``default`` (the lane's
    family- and config-aware default), else :data:`DEFAULT_DURATIONS_S`, else :data:`UNKNOWN_DURATION_S`."""
    est = history_estimate(LaneKey(lane, profile, instance_type, models, fingerprints), history)
    if est is not None:
        return Expected(est.seconds, est.source(hms))
    default = default or DEFAULT_DURATIONS_S.get((profile, lane))
    if default:
        return Expected(default[0], f"default: {default[1]}")
    return Expected(UNKNOWN_DURATION_S, f"unknown: no history, no default (assumed {UNKNOWN_DURATION_S:.0f} s)")


def timetable_graph(
    nodes: Sequence[Node],
    durations: Mapping[str, float],
    prices: Mapping[str, float],
    box_order: Sequence[str] = ("trn1", "inf2"),
    overhead_s: float = SEGMENT_OVERHEAD_S,
    max_concurrency: int = 0,
) -> Timetable:
    """Waves in turn; in a wave each box runs its segment at once (the state machine's shape), at most
    ``max_concurrency`` at once when it is set (a matrix: the Map starts the next segment, in item order, when one
    ends)."""
    import heapq

    segments: list[Segment] = []
    path: list[str] = []
    t = 0.0
    for wave in sorted({n.wave for n in nodes}):
        longest: Segment | None = None
        boxes = {n.box for n in nodes if n.wave == wave}
        slots = [t] * (max_concurrency or len(boxes))
        heapq.heapify(slots)
        for box in sorted(boxes, key=lambda b: (list(box_order).index(b) if b in box_order else len(box_order), b)):
            start = heapq.heappop(slots)
            seg = _segment(
                box, wave, start, [n for n in nodes if n.wave == wave and n.box == box], durations, overhead_s
            )
            heapq.heappush(slots, seg.end_s)
            segments.append(seg)
            if longest is None or seg.end_s > longest.end_s:
                longest = seg
        if longest is not None:
            path += [lane for lane, _, _ in longest.lanes]
            t = longest.end_s
    return Timetable("graph (boxes at once)", segments, prices, path)


def timetable_sequential(
    nodes: Sequence[Node],
    durations: Mapping[str, float],
    prices: Mapping[str, float],
    box_order: Sequence[str],
    overhead_s: float = SEGMENT_OVERHEAD_S,
) -> Timetable:
    """The order before the graph: one box after the other, each box's lanes in registry order."""
    segments: list[Segment] = []
    t = 0.0
    for box in [b for b in box_order if any(n.box == b for n in nodes)]:
        seg = _segment(
            box, 0, t, sorted((n for n in nodes if n.box == box), key=lambda n: n.order), durations, overhead_s
        )
        segments.append(seg)
        t = seg.end_s
    return Timetable(
        "sequential (one box, then the other)", segments, prices, [lane for s in segments for lane, _, _ in s.lanes]
    )


def _segment(
    box: str, wave: int, start: float, nodes: Sequence[Node], durations: Mapping[str, float], overhead_s: float
) -> Segment:
    t = start + overhead_s
    lanes = []
    for n in sorted(nodes, key=lambda n: n.order):
        d = float(durations.get(n.result_lane, UNKNOWN_DURATION_S))
        lanes.append((n.result_lane, t, t + d))
        t += d
    return Segment(box, wave, start, t, lanes)


def hms(seconds: float) -> str:
    h, rem = divmod(int(round(seconds)), 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


# ---- what each server config's boots are expected to cost ---------------------------------------------------
# (profile, backend) -> (cold compile s, warm boot s, uncached boot s, source). On a Neuron box a config's first
# boot compiles its graphs (cold) unless a config with the same fingerprint compiled them before in the lane;
# every later boot loads them (warm). A CUDA vLLM boot compiles no NEFF: every boot costs the same (weights,
# torch.compile, CUDA-graph capture), none is cold. The CPU servers compile nothing: every boot is uncached.
# the Neuron compile and warm boot, and the CUDA boot, are the Decision's lifecycle anchors: one figure each
NEURON_COLD_S = LIFECYCLE_ANCHORS[("neuron", "cold_compile")][0]
NEURON_WARM_S = LIFECYCLE_ANCHORS[("neuron", "warm_boot")][0]
CUDA_BOOT_S = LIFECYCLE_ANCHORS[("cuda", "warm_boot")][0]
BOOT_COSTS_S: dict[tuple[str, str], tuple[float, float, float, str]] = {
    ("full", "neuron"): (
        NEURON_COLD_S,
        NEURON_WARM_S,
        NEURON_WARM_S,
        ANCHOR + ": cold serving compile 2,372 s per config, warm boot 548 s (Llama 3.1 8B, inf2.xlarge)",
    ),
    ("full", "cuda"): (
        0.0,
        CUDA_BOOT_S,
        CUDA_BOOT_S,
        ESTIMATE + ": a vLLM CUDA boot of an 8B bf16 model, 120 s (the top of a 90-120 s range: ~16 GB of "
        "weights from the box's disk, torch.compile with an empty cache on a fresh box, CUDA-graph capture); "
        "no Neuron compile. The project's own server boots in 16-18 s on an H200, but captures no CUDA graphs "
        "and compiles nothing, so it bounds vLLM's boot from below only",
    ),
    ("tiny", "cpu"): (3.5, 3.5, 3.5, "measured: the CPU server boots in 3.3-3.6 s on the 2-core VM (2026-12-01)"),
}


def boot_costs(profile: str, backend: str) -> tuple[float, float, float, str]:
    """The boot costs of ``backend`` at ``profile``: the tiny profile's are measured on CPU whatever the box;
    a full-profile backend without a row of its own is costed as Neuron (the dearest)."""
    if profile == "tiny":
        return BOOT_COSTS_S[("tiny", "cpu")]
    return BOOT_COSTS_S.get(("full", backend), BOOT_COSTS_S[("full", "neuron")])


@dataclass(frozen=True)
class ServeWork:
    """A full-profile serving lane's expected work per (model, server config) besides its boots."""

    boot: str  # "cold": its first boot compiles (on Neuron); "warm": the cache (seeded) holds its graphs
    boots: int  # boots per (model, config)
    work_s: float  # seconds of work per (model, config) after the boots
    what: str  # the work, for the source string
    default_configs: int  # server configs its default Config declares (the pinned plan's anchor)
    per_config: bool = True  # False: one config's boot whatever it declares (an attempt on the first)


SERVE_WORK: dict[str, ServeWork] = {
    "serve_sweep": ServeWork("cold", 1, 1200.0, "~20 min sweep", 2),
    "finetune_serve": ServeWork("warm", 1, 1200.0, "~20 min sweep", 2),
    "capacity": ServeWork("warm", 1, 7200.0, "the 2 h search budget (max_search_s)", 1),
    "sustained": ServeWork("warm", 1, 1800.0, "the 30 min closed loop", 1),
    "quality": ServeWork("warm", 2, 300.0, "~5 min of prompts (two boots: the base and its fine-tune)", 1),
    "qwen3_attempt": ServeWork("cold", 1, 300.0, "~5 min attempt on its first config", 1, per_config=False),
}


def serve_default(
    lane: str, profile: str, backend: str, configs: int | None = None, models: int = 1
) -> tuple[float, str] | None:
    """A full-profile serving lane's default (seconds, source): per (model, config) its boots on ``backend``'s
    family plus its work; None for another lane or the tiny profile (measured: :data:`DEFAULT_DURATIONS_S`)."""
    work = SERVE_WORK.get(lane)
    if work is None or profile == "tiny":
        return None
    cold_s, warm_s, _, _ = boot_costs(profile, backend)
    n = (configs or work.default_configs) if work.per_config else 1
    pairs = n * max(1, models)
    if backend == "neuron":
        label, boot_s = ANCHOR, cold_s if work.boot == "cold" else warm_s
        boot = f"cold serving compile {cold_s:,.0f} s" if work.boot == "cold" else f"warm boot {warm_s:,.0f} s"
    else:
        label, boot_s, boot = ESTIMATE, warm_s, f"vLLM CUDA boot {warm_s:,.0f} s, no Neuron compile"
    boots = f"{work.boots} x {boot}" if work.boots > 1 else boot
    seconds = pairs * (work.boots * boot_s + work.work_s)
    return seconds, (
        f"{label} (family {backend}): {boots} + {work.what}, x {n} config{'s' if n != 1 else ''}"
        f"{f' x {models} models' if models > 1 else ''}"
    )


DEFAULT_DURATIONS_S.update({("full", lane): serve_default(lane, "full", "neuron") for lane in SERVE_WORK})  # type: ignore[misc]


# (profile) -> (seconds per train_limits probe, source). A probe is a short LoRA SFT run; on trn1 its first step
# compiles the training graph at the probed length (a new graph each probe), which is nearly all of its time.
TRAIN_PROBE_COSTS_S: dict[str, tuple[float, str]] = {
    "full": (
        1500.0,
        ANCHOR + ": a Llama 3.1 8B training-graph compile, 1,498 s in its precompile "
        "(trn1/results/compile/llama31_train.json); its seq-4096 probe's first step took "
        "1,159 s and its seq-8192 probe failed compiling after ~25 min (results/extras/)",
    ),
    "tiny": (
        7.0,
        "measured: a CPU probe (tiny-llama, 2 steps, its own process) takes 5-9 s on the 2-core VM (2026-12-01)",
    ),
}


def accuracy_default(profile: str, backend: str = "neuron", config: Any = None) -> tuple[float, str]:
    """accuracy's default duration: its Config (the profile's default unless given), samples x expected latency
    + a warm boot of the family per evaluation (``pipeline.accuracy.expected_seconds``) on the profile's target
    (full on Neuron: the inf2 box, whose server serves no prompt logprobs, so the generation tasks only; full on
    CUDA: one GPU's vLLM)."""
    from pipeline.accuracy import expected_seconds
    from pipeline.lane_configs.accuracy import Config
    from pipeline.servers import NEURON_BOX, ServingTarget

    warm = boot_costs(profile, backend)[1]
    if profile != "full":
        target = ServingTarget("cpu", "neuronpipe", 1)
    else:
        target = NEURON_BOX if backend == "neuron" else ServingTarget(backend, devices=1)
    cost = expected_seconds(config or Config.for_profile(profile), profile, target, boot_s=warm)
    family = f" (family {backend})" if profile == "full" else ""
    return round(cost.seconds, 1), f"samples x expected latency{family}: {cost.basis}"


DEFAULT_DURATIONS_S.update({(p, "accuracy"): accuracy_default(p) for p in ("full", "tiny")})


@dataclass(frozen=True)
class ConfigBoots:
    lane: str
    model: str
    config: str
    fingerprint: str
    sets: str
    boots: int
    cold: int
    expected_s: float
    source: str
    unit: str = "boot"  # "training probe": a train_limits probe (a short training run), not a server boot


def config_boots(lane: str, built: Any, profile: str, backend: str) -> list[ConfigBoots]:
    """Each (model, server config) of a serving lane's resolved ``Config``: its boots (one per repeat when the
    sweep interleaves repeats, else one), how many compile cold, and their expected seconds."""
    from pipeline.servers import resolve_server_configs, served_models

    configs = resolve_server_configs(built.server_configs, profile, backend, check=False)
    repeats = int(getattr(built, "sweep_repeats", 1) or 1)
    per_config = repeats if repeats > 1 and getattr(built, "repeat_order", "interleaved") != "blocked" else 1
    models = served_models(built)
    cold_s, warm_s, none_s, source = boot_costs(profile, backend)
    out = []
    for model in models:
        compiled: set[str] = set()
        for cfg in configs:
            fp = cfg.fingerprint()
            sets = ", ".join(f"{k}={v}" for k, v in cfg.to_config().items())
            if backend != "neuron":
                out.append(ConfigBoots(lane, model, cfg.name, fp, sets, per_config, 0, per_config * none_s, source))
                continue
            cold = 0 if fp in compiled else 1
            compiled.add(fp)
            seconds = cold * cold_s + (per_config - cold) * warm_s
            out.append(ConfigBoots(lane, model, cfg.name, fp, sets, per_config, cold, seconds, source))
    return out


def limits_boots(lane: str, built: Any, profile: str, backend: str) -> list[ConfigBoots]:
    """A limits lane's probe budget: per search, at most ``max_boots`` probes, each a cold compile on a Neuron
    box (every probe is a new fingerprint): a server boot (limits), or a short training run whose first step
    compiles the training graph (train_limits, :data:`TRAIN_PROBE_COSTS_S`)."""
    from pipeline.limits import KINDS, OTHER, TRAINING_KINDS, check_searches

    cold_s, _, none_s, boot_source = boot_costs(profile, backend)
    probe_s, probe_source = TRAIN_PROBE_COSTS_S.get(profile, TRAIN_PROBE_COSTS_S["full"])
    out = []
    for s in check_searches(built.searches, built.max_boots, KINDS):
        training = s.kind in TRAINING_KINDS
        each, source = (probe_s, probe_source) if training else (cold_s if backend == "neuron" else none_s, boot_source)
        at = s.at if s.at is not None else "the sft lane's" if training else "base"
        out.append(
            ConfigBoots(
                lane,
                built.model,
                f"{'LoRA SFT' if training else built.server_config} ({s.kind} search)",
                "(one per probe)",
                f"{s.kind} in ({s.good}, {s.bad}] at {OTHER[s.kind]}={at}",
                s.max_boots,
                s.max_boots if backend == "neuron" else 0,
                s.max_boots * each,
                source,
                "training probe" if training else "boot",
            )
        )
    return out


@dataclass(frozen=True)
class PlannedLane:
    """What the history rule and the defaults need of a planned lane: its models, its server configs'
    fingerprints (None: the lane declares none), and its default (seconds, source) on its box's family."""

    models: tuple[str, ...] | None
    fingerprints: tuple[str, ...] | None
    default: tuple[float, str] | None


def planned_lane(lane: str, profile: str, backend: str, config: Mapping[str, Any] | None) -> PlannedLane:
    """A planned lane's models, fingerprints and family-aware default from its step's config (the lane's own
    defaults filling the rest)."""
    from control_plane.lane_configs import built_config
    from control_plane.lane_history import fingerprints
    from control_plane.request_configs import SERVER_CONFIGS_FIELD
    from pipeline.lanes import get_lane
    from pipeline.servers import served_models

    spec = get_lane(lane)
    built = built_config(spec, profile, config, SERVER_CONFIGS_FIELD)
    if built is None:
        for field_name in ("server_config", "model", "models"):
            if (built := built_config(spec, profile, config, field_name)) is not None:
                break
    if built is None:
        return PlannedLane(None, None, DEFAULT_DURATIONS_S.get((profile, lane)))
    models = tuple(sorted(set(served_models(built))))
    declared = getattr(built, "server_configs", None)
    if declared is None and getattr(built, "server_config", None):
        declared = [built.server_config]
    fps = fingerprints(declared, profile, backend)
    n_configs = len(declared) if isinstance(declared, (list, tuple, dict)) and fps else None
    default = serve_default(lane, profile, backend, n_configs, len(models) or 1)
    if lane == "accuracy" and profile == "full":
        default = accuracy_default(profile, backend, built)
    return PlannedLane(models, fps, default or DEFAULT_DURATIONS_S.get((profile, lane)))
