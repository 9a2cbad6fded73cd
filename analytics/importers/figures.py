"""The predecessor's headline figures beside ours, after an import.

"Theirs" is read from the predecessor's own files (its JSON headline fields, as it printed them);
"ours" from our views over the imported run — so a figure that matches means our tables, views and
rules reproduce it, not that a number was copied. Nothing here is a hard-coded result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from analytics.importers.source import GitRepo, Tree
from analytics.importers.torchneuronx import every_attempt
from analytics.store import ResultStore
from pipeline import jsonio


@dataclass(frozen=True)
class Figure:
    name: str
    theirs: float | str | None
    ours: float | str | None
    rel_tol: float | None  # None: must be equal

    @property
    def holds(self) -> bool:
        if self.theirs is None or self.ours is None:
            return False
        if self.rel_tol is None or isinstance(self.theirs, str) or isinstance(self.ours, str):
            return self.theirs == self.ours
        return abs(float(self.ours) - float(self.theirs)) <= self.rel_tol * abs(float(self.theirs))


def _json(tree: Tree, path: str) -> dict[str, Any]:
    return jsonio.loads(tree.read(path), allow_nan=True)


def _one(con: Any, sql: str, *params: Any) -> Any:
    row = con.execute(sql, list(params)).fetchone()
    return row[0] if row else None


def figures(con: Any, store: ResultStore, run_id: str, tree: Tree, repo: GitRepo | None) -> list[Figure]:
    lora = _json(tree, "trn1/results/train/llama31_lora.json")
    base = "inf2/results/serve/llama31_base_short/"
    c1, c32 = _json(tree, base + "isl1024_osl1024_c1.json"), _json(tree, base + "isl1024_osl1024_c32.json")
    dolly_boot = _json(tree, "inf2/results/serve/llama31_dolly_short/boot.json")
    sustained = _json(tree, "inf2/results/sustained/sustained.json")
    qwen = [
        _json(tree, p)
        for p in tree.files("inf2/results/serve/qwen3_base_short/")
        if p.rsplit("/", 1)[-1].startswith("isl") and p.endswith(".json")
    ]
    model = lora["model"]
    out = [
        Figure(
            "Llama 3.1 8B LoRA tokens/s",
            lora["tokens_per_s"],
            _one(
                con,
                "SELECT tokens_per_s FROM train_runs WHERE run_id = ? AND lane = 'sft' AND model = ?",
                run_id,
                model,
            ),
            0.001,
        ),
        Figure(
            "MFU at 210 TFLOP/s (%)",
            lora["mfu_pct"],
            _pct(
                _one(
                    con, "SELECT mfu_alt FROM train_runs WHERE run_id = ? AND lane = 'sft' AND model = ?", run_id, model
                )
            ),
            0.001,
        ),
        Figure(
            "inf2 base c1 output tok/s", c1["output_throughput"], _point(con, run_id, "c1", "output_throughput"), 0.001
        ),
        Figure("inf2 base c1 TTFT p50 (ms)", c1["p50_ttft_ms"], _point(con, run_id, "c1", "p50_ttft_ms"), 0.0),
        Figure("inf2 base c1 TPOT p50 (ms)", c1["p50_tpot_ms"], _point(con, run_id, "c1", "p50_tpot_ms"), 0.0),
        Figure(
            "inf2 base c32 output tok/s",
            c32["output_throughput"],
            _point(con, run_id, "c32", "output_throughput"),
            0.001,
        ),
        Figure(
            "fine-tune boot, shared cache warm (s)",
            dolly_boot["boot_wall_s"],
            _one(
                con,
                "SELECT wall_s FROM compiles WHERE run_id = ? AND lane = 'finetune_serve' AND cache = 'warm' "
                "AND succeeded",
                run_id,
            ),
            0.0,
        ),
        Figure(
            "sustained retention, predecessor's rule (%)",
            sustained["retention_vs_first_pct"],
            _pct(
                _one(
                    con,
                    "SELECT retention FROM sustained_iterations WHERE run_id = ? AND rule = 'tail3_mean_over_first'",
                    run_id,
                ),
                1,
            ),
            0.0,
        ),
        Figure(
            "Qwen3 requests sent",
            sum(d["num_prompts"] for d in qwen),
            _one(con, "SELECT count(*) FROM requests WHERE run_id = ? AND lane = 'qwen3_attempt'", run_id),
            None,
        ),
        Figure(
            "Qwen3 requests with one token",
            sum(d["completed"] for d in qwen if d["total_output_tokens"] == 1),
            _one(
                con,
                "SELECT count(*) FROM requests WHERE run_id = ? AND lane = 'qwen3_attempt' AND success "
                "AND output_tokens = 1",
                run_id,
            ),
            None,
        ),
        Figure(
            "Qwen3 requests failed",
            sum(d["failed"] for d in qwen),
            _one(
                con, "SELECT count(*) FROM requests WHERE run_id = ? AND lane = 'qwen3_attempt' AND NOT success", run_id
            ),
            None,
        ),
        Figure(
            "Qwen3 failures' verbatim error",
            _qwen_log_error(tree),
            _one(
                con,
                "SELECT string_agg(DISTINCT error, ' | ') FROM requests WHERE run_id = ? "
                "AND lane = 'qwen3_attempt' AND NOT success",
                run_id,
            ),
            None,
        ),
    ]
    out += phase2_figures(con, run_id, tree) + train_limit_figures(con, run_id, tree)
    out += training_extra_figures(con, run_id, tree) + encoder_figures(con, run_id, tree)
    if repo is not None and tree.commit:
        first = _first_version(repo, tree.commit, base + "boot.json")
        ours = None
        boots = every_attempt(store, run_id, "compiles").to_pylist()
        cold = sorted(
            (
                b
                for b in boots
                if b["what"] == "serving_config"
                and b["cache"] == "cold"
                and b["succeeded"]
                and b["model"] == first.get("model_id")
                and b["ts"] is not None
            ),
            key=lambda b: b["ts"],
        )
        if cold:
            ours = cold[0]["wall_s"]
        out.append(Figure("first cold boot, base model, --history (s)", first.get("boot_wall_s"), ours, 0.0))
    return out


def phase2_figures(con: Any, run_id: str, tree: Tree) -> list[Figure]:
    """Its Phase-2 headlines (REPORT-EXTENSIONS): theirs from its extras' files, ours from our views over the
    imported run (the Variants, Limits and tenant points). Empty when the source has no extras."""
    from analytics.importers.tnx_extras import EXTRAS, LEN_RE

    files = set(tree.files(EXTRAS))
    if not files:
        return []
    out: list[Figure] = []

    def agg(config: str, conc: int, column: str, model: str | None = None) -> Any:
        return _one(
            con,
            f"SELECT {column} FROM serving_points_all WHERE run_id = ? AND lane = 'serve_sweep' "
            "AND server_config = ? AND max_concurrency = ?" + (" AND model = ?" if model else ""),
            run_id,
            config,
            conc,
            *([model] if model else []),
        )

    if EXTRAS + "quant/fp8kv_c8.json" in files:
        fp8 = _json(tree, EXTRAS + "quant/fp8kv_c8.json")
        bf16 = _json(tree, "inf2/results/serve/llama31_base_short/isl1024_osl1024_c8.json")
        out += [
            Figure(
                "fp8 KV cache c8 output tok/s", fp8["output_throughput"], agg("fp8kv", 8, "output_throughput"), 0.001
            ),
            Figure(
                "bf16 KV cache c8 output tok/s (the same points)",
                bf16["output_throughput"],
                agg("short", 8, "output_throughput", bf16["model_id"]),
                0.001,
            ),
        ]
    mistral = EXTRAS + "serve/mistral7b_short/"
    if mistral + "isl1024_osl1024_c32.json" in files:
        c32 = _json(tree, mistral + "isl1024_osl1024_c32.json")
        boot = _json(tree, mistral + "boot.json")
        out += [
            Figure(
                "Mistral-7B c32 output tok/s",
                c32["output_throughput"],
                agg("short", 32, "output_throughput", c32["model_id"]),
                0.001,
            ),
            Figure(
                "Mistral-7B cold compile (s)",
                boot["boot_wall_s"],
                _one(
                    con,
                    "SELECT wall_s FROM compiles WHERE run_id = ? AND lane = 'serve_sweep' AND model = ? "
                    "AND cache = 'cold' AND succeeded",
                    run_id,
                    boot["model_id"],
                ),
                0.0,
            ),
        ]
    lens = sorted(int(LEN_RE.search(f).group(1)) for f in files if LEN_RE.search(f))
    if lens:
        ok = [n for n in lens if _json(tree, EXTRAS + f"ctx_bisect/len_{n}.json").get("status") == "healthy"]
        bad = [n for n in lens if n not in ok and (not ok or n > max(ok))]
        theirs = f"({max(ok)}, {min(bad)}]" if ok and bad else None
        out.append(
            Figure(
                "serving context cliff at 8 sequences (max_model_len)",
                theirs,
                _one(con, "SELECT bracket FROM report_limits WHERE run_id = ? AND lane = 'limits'", run_id),
                None,
            )
        )
        status = _json(tree, EXTRAS + f"ctx_bisect/len_{min(bad)}.json").get("status") if bad else None
        code = re.search(r"NCC_[A-Z]+\d+", str(status)).group(0) if status and re.search(r"NCC_", str(status)) else None
        ours = _one(con, "SELECT error_at_high FROM report_limits WHERE run_id = ? AND lane = 'limits'", run_id)
        out.append(
            Figure(
                "its compiler error at the cliff",
                code,
                re.search(r"NCC_[A-Z]+\d+", ours).group(0) if ours and re.search("NCC_", ours) else None,
                None,
            )
        )
    for i in (0, 1):
        path = EXTRAS + f"multitenant/tenant{i}_c4.json"
        if path in files:
            out.append(
                Figure(
                    f"two tenants, one NeuronCore each: tenant {i} c4 output tok/s",
                    _json(tree, path)["output_throughput"],
                    agg(f"tenant.t{i}", 4, "output_throughput"),
                    0.001,
                )
            )
    return out


def train_limit_figures(con: Any, run_id: str, tree: Tree) -> list[Figure]:
    """Its trn1 Phase 2 (``trn1/results/extras/ctx_<N>``): theirs from its files, ours from the train_limits lane's
    bracket (report_limits) and its training run at the longest length that trained (train_runs). Empty without."""
    from analytics.importers.tnx_extras import CTX_RE, TRN1_EXTRAS

    found = [(int(m.group(1)), p, bool(m.group(2))) for p in tree.files(TRN1_EXTRAS) if (m := CTX_RE.search(p))]
    ok = [(n, p) for n, p, failed in found if not failed]
    bad = sorted(n for n, _, failed in found if failed and (not ok or n > max(ok)[0]))
    if not ok or not bad:
        return []
    n, path = max(ok)
    theirs = _json(tree, path)
    reason = str(_json(tree, TRN1_EXTRAS + f"ctx_{bad[0]}.failure.json").get("reason"))
    limit = con.execute(
        "SELECT bracket, error_at_high FROM report_limits WHERE run_id = ? AND lane = 'train_limits'", [run_id]
    ).fetchone() or (None, None)

    def code(text: str | None) -> str | None:
        m = re.search(r"NCC_[A-Z]+\d+", text or "")
        return m.group(0) if m else None

    def hbm(text: str | None) -> str | None:  # "usage of 18.12GB exceeds HBM limit of 16.00GB"
        m = re.search(r"usage of ([\d.]+)\s*GB exceeds HBM limit of ([\d.]+)\s*GB", text or "")
        return f"{m.group(1)} GB vs {m.group(2)} GB" if m else None

    def run(column: str) -> Any:
        return _one(
            con,
            f"SELECT {column} FROM train_runs WHERE run_id = ? AND lane = 'train_limits' AND max_seq_len = ?",
            run_id,
            n,
        )

    return [
        Figure(
            f"training sequence cliff at batch {theirs['config']['micro_batch']} (train_seq_len)",
            f"({n}, {bad[0]}]",
            limit[0],
            None,
        ),
        Figure("its compiler error at the training cliff", code(reason), code(limit[1]), None),
        Figure("HBM needed vs the limit at the training cliff", hbm(reason), hbm(limit[1]), None),
        Figure(f"LoRA tokens/s at sequence {n}", theirs["tokens_per_s"], run("tokens_per_s"), 0.001),
        Figure(f"MFU at sequence {n}, 210 TFLOP/s (%)", theirs["mfu_pct"], _pct(run("mfu_alt")), 0.001),
    ]


def training_extra_figures(con: Any, run_id: str, tree: Tree) -> list[Figure]:
    """§13.7's checkpoint saves (``extras/ckpt_timing.json``: ours from ``report_train_saves``) and the academic runs
    (``academic/<dataset>_<arch>.json``: ours from ``report_scratch``). Empty where the source has neither."""
    import statistics

    from analytics.importers.tnx_training import ACADEMIC, ACADEMIC_RE, CKPT

    out: list[Figure] = []
    if tree.exists(CKPT):
        ckpt = _json(tree, CKPT)
        times = [s["save_wall_s"] for s in ckpt["checkpoint_saves"]]

        def saves(column: str) -> Any:
            sql = f"SELECT {column} FROM report_train_saves WHERE run_id = ? AND lane = 'sft' AND model = ?"
            return _one(con, sql, run_id, ckpt["model"])

        out += [
            Figure("adapter checkpoint saves, TinyLlama (count)", len(times), saves("saves"), None),
            Figure("median adapter save (s)", statistics.median(times), saves("median_save_s"), 0.0),
            Figure("adapter saves in all (s)", round(sum(times), 2), saves("round(total_save_s, 2)"), 0.0),
        ]
    for path in sorted(p for p in tree.files(ACADEMIC) if ACADEMIC_RE.search(p)):
        d = _json(tree, path)
        name = f"{d['dataset']} {d['arch']}"

        def scratch(column: str, d: dict[str, Any] = d) -> Any:
            sql = (
                f"SELECT {column} FROM report_scratch WHERE run_id = ? AND lane = 'from_scratch' AND dataset = ? "
                "AND model = ? AND source = 'imported'"
            )
            return _one(con, sql, run_id, d["dataset"], d["arch"])

        out += [
            Figure(
                f"{name} best test accuracy, one NeuronCore (%)",
                d["best_test_acc"],
                _pct(scratch("best_accuracy"), 2),
                0.0,
            ),
            # theirs: batch / its median rounded to 0.01 ms; ours: batch / that rounded median
            Figure(f"{name} steady samples/s", d["samples_per_s_steady"], scratch("samples_per_s"), 0.01),
        ]
    return out


def _pct(x: float | None, digits: int | None = None) -> float | None:
    if x is None:
        return None
    return round(100.0 * x, digits) if digits is not None else 100.0 * x


def _point(con: Any, run_id: str, conc: str, column: str) -> Any:
    return _one(
        con,
        f"SELECT {column} FROM serving_points_all WHERE run_id = ? AND lane = 'serve_sweep' AND point_id = ?",
        run_id,
        f"llama31_base_short/isl1024_osl1024_{conc}",
    )


def encoder_figures(con: Any, run_id: str, tree: Tree) -> list[Figure]:
    """§13.1's encoders (``extras/{whisper,clip.failure,siglip}.json``: ours from ``report_encoders``): Whisper's
    RTF, compile and load; CLIP's NaN verdict; SigLIP's exporter refusal. Empty where the source has none."""
    from analytics.importers.tnx_encoders import CLIP, SIGLIP, WHISPER

    def ours(column: str, model: str) -> Any:
        sql = f"SELECT {column} FROM report_encoders WHERE run_id = ? AND lane = 'encode' AND model = ?"
        return _one(con, sql, run_id, model)

    out: list[Figure] = []
    if tree.exists(WHISPER):
        w = _json(tree, WHISPER)
        out += [
            Figure("Whisper-small real-time factor, 11 s clip", w["rtf"], ours("round(rtf, 3)", w["model"]), 0.0),
            Figure("Whisper-small compile (s)", w["compile_s"], ours("compile_s", w["model"]), 0.0),
            Figure("Whisper-small load (s)", w["load_s"], ours("load_s", w["model"]), 0.0),
        ]
    if tree.exists(CLIP):
        theirs = "nan" if "NaN" in str(_json(tree, CLIP).get("reason")) else None
        verdict = ours("numerics_verdict", "openai/clip-vit-base-patch32")
        out.append(Figure("CLIP ViT-B/32 numerics verdict (NaN outputs)", theirs, verdict, None))
    if tree.exists(SIGLIP):
        s = _json(tree, SIGLIP)
        out.append(Figure("SigLIP exporter refusal, verbatim", s["reason"], ours("placement_reason", s["model"]), None))
    return out


def _qwen_log_error(tree: Tree) -> str | None:
    from analytics.importers.tnx_inf2 import FAILED_RE

    errors = set()
    for p in tree.files("inf2/results/serve/qwen3_base_short/"):
        if p.rsplit("/", 1)[-1].startswith("isl") and p.endswith(".log"):
            errors |= {m.group(2).strip() for m in map(FAILED_RE.match, tree.text(p).splitlines()) if m}
    return " | ".join(sorted(errors)) or None


def _first_version(repo: GitRepo, ref: str, path: str) -> dict[str, Any]:
    commits = repo.history(ref, [path])
    return jsonio.loads(repo.read(commits[0].sha, path), allow_nan=True) if commits else {}
