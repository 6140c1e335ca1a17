"""The CPU benchmark's Markdown and its goals (issue 34's table), from the report's JSON.

Terms:
- *ratio vs llama.cpp*: a speed as a multiple of llama.cpp's on the same config (tokens/s, so
  above 1 is faster); a memory or load time as a multiple of llama.cpp's (below 1 is less).
- *agreement*: the last-position logits of one probe prompt from two runtimes: the largest
  difference over the largest reference logit, and whether the argmax is the same.
  tribuild is compared with transformers as is (squared ReLU); llama.cpp with transformers'
  SiLU logits (``torch_side``'s doc says why). tribuild and llama.cpp quantize activations to
  8 bits (per token, and per block of 256 for llama.cpp's TQ2_0 dot product); transformers'
  float model does not: the differences include that.
- *tribuild's loads*: its row's load is a second load, which maps the conversion the first
  load wrote to its weight cache; its *first load* (``first_load``: the cache empty, the
  float checkpoint read and ternarized) has a row of its own with the load figures alone. The
  load goal is judged on the second load (llama.cpp's figure is a load of the GGUF its
  converter wrote before, too); its row shows the first load's ratio beside it.
- *goal row*: ``{goal, bound, limit, at_least, measured, met}``: ``measured`` is met when
  it is at least ``limit`` (``at_least``) or at most it; ``met`` is None where the run could
  not measure the figure (a runtime that did not run, a config not run). ``cpu_runs.py``
  judges the median of several runs the same way.
"""

from __future__ import annotations

GB = 1e9
LOAD_BOUND, MEMORY_BOUND, PEAK_2B_BOUND, GEMV_BOUND = 1.5, 1.25, 3e9, 0.7


def _compare(a: list[float], b: list[float]) -> dict:
    top = max(abs(v) for v in b)
    return {
        "max_rel_diff": max(abs(x - y) for x, y in zip(a, b, strict=True)) / top,
        "same_argmax": a.index(max(a)) == b.index(max(b)),
    }


def agreement(runtimes: dict[str, dict]) -> dict:
    hf = runtimes.get("transformers", {})
    out = {}
    if "logits" in hf and "logits" in runtimes.get("tribuild", {}):
        out["tribuild vs transformers"] = _compare(runtimes["tribuild"]["logits"], hf["logits"])
    if "silu" in hf and "logits" in runtimes.get("llama.cpp", {}):
        out["llama.cpp vs transformers (SiLU)"] = _compare(
            runtimes["llama.cpp"]["logits"], hf["silu"]
        )
    return out


def _ok(figures: dict | None) -> bool:
    return bool(figures) and "error" not in figures  # type: ignore[operator]


def _ratios(config: dict, name: str) -> dict[str, float | None]:
    """``name``'s figures as multiples of llama.cpp's (see the module doc)."""
    runs = config["runtimes"]
    mine, ref = runs.get(name), runs.get("llama.cpp")
    if not (_ok(mine) and _ok(ref)):
        return {}
    assert mine is not None and ref is not None
    out: dict[str, float | None] = {"decode": ref["decode_ms"] / mine["decode_ms"]}
    for n in mine["prefill_tok_s"]:
        out[f"prefill {n}"] = mine["prefill_tok_s"][n] / ref["prefill_tok_s"][n]
    out["memory"] = mine["model_adds"] / ref["model_adds"]
    reference = ref["load_s"] + ref["first_token_s"]
    out["load"] = (mine["load_s"] + mine["first_token_s"]) / reference
    first = mine.get("first_load")
    if _ok(first):
        out["first load"] = (first["load_s"] + first["first_token_s"]) / reference
    return out


def goals(report: dict) -> list[dict]:
    rows: list[dict] = []

    def row(
        goal: str, bound: str, value: float | None, limit: float, at_least: bool, text: str
    ) -> None:
        rows.append(
            {
                "goal": goal,
                "bound": bound,
                "limit": limit,
                "at_least": at_least,
                "measured": value,
                "met": None if value is None else meets(value, limit, at_least),
                "text": text,
            }
        )

    for name, config in report["configs"].items():
        r = _ratios(config, "tribuild")
        why = _why_missing(config)

        def ratio(
            goal: str, key: str, bound: float, at_least: bool, r=r, name=name, why=why
        ) -> None:
            v = r.get(key)
            sign = ">=" if at_least else "<="
            row(f"{goal}, {name}", f"{sign} {bound}x llama.cpp", v, bound, at_least, _x(v, why))

        ratio("decode", "decode", 1.0, True)
        for n in config["plan"]["prefill"]:
            ratio(f"prefill {n}", f"prefill {n}", 1.0, True)
        ratio("memory the model adds", "memory", MEMORY_BOUND, False)
        if name == "bitnet_2b":
            mine = config["runtimes"].get("tribuild")
            peak = mine["peak_rss"] if mine and _ok(mine) else None
            text = f"{peak / GB:.2f} GB" if peak is not None else why
            row("peak RSS, bitnet_2b", "<= 3 GB", peak, PEAK_2B_BOUND, False, text)
        v = r.get("load")
        bound = f"<= {LOAD_BOUND}x llama.cpp, a second load (the weight cache filled)"
        row(f"load + first token, {name}", bound, v, LOAD_BOUND, False, _x(v, why))
        # the first load converts the float32 checkpoint (llama.cpp's conversion is not timed):
        # a row of its own, judged by the same bound, so that no summary leaves it out
        first = r.get("first load")
        bound = f"<= {LOAD_BOUND}x llama.cpp, the first load (it converts; the cache empty)"
        row(f"first load + first token, {name}", bound, first, LOAD_BOUND, False, _x(first, why))
    k = report.get("kernels")
    if k and _ok(k):
        share = max(k["bitlinear_gb_s"], k["ternary_gb_s"]) / k["read_gb_s"]
        bound = f">= {GEMV_BOUND:.0%} of read bandwidth"
        row("decode GEMV kernel", bound, share, GEMV_BOUND, True, f"{share:.0%}")
    res = report.get("resnet18")
    if res and _ok(res):
        v = res["speedup"]
        row("ResNet-18 batch 1", ">= 1.0x float32 PyTorch", v, 1.0, True, _x(v, ""))
    return rows


def meets(value: float, limit: float, at_least: bool) -> bool:
    return value >= limit if at_least else value <= limit


def _x(value: float | None, why: str) -> str:
    return f"{value:.2f}x" if value is not None else why


def _why_missing(config: dict) -> str:
    for name in ("tribuild", "llama.cpp"):
        figures = config["runtimes"].get(name)
        if figures is None:
            return f"{name} not run"
        if "error" in figures:
            return f"{name} did not run"
    return "not measured"


def _fmt(value: float | None, spec: str, ratio: float | None = None) -> str:
    if value is None:
        return "–"
    text = format(value, spec)
    return f"{text} ({ratio:.2f}x)" if ratio is not None else text


def lm_table(report: dict) -> list[str]:
    lengths = sorted({n for c in report["configs"].values() for n in c["plan"]["prefill"]})
    out = [
        "| config | runtime | decode ms/token (tok/s vs llama.cpp) | "
        + " | ".join(f"prefill {n} tok/s (vs llama.cpp)" for n in lengths)
        + " | peak RSS GB | model adds GB (vs llama.cpp) | load s | load + first token s "
        "(vs llama.cpp) | measured at (load average) |",
        "|---|---|---|" + "---|" * len(lengths) + "---|---|---|---|---|",
    ]
    for name, config in report["configs"].items():
        for runtime, f in config["runtimes"].items():
            if not _ok(f):
                out.append(f"| {name} | {runtime} | {f.get('error', '?')} |")
                continue
            r = _ratios(config, runtime) if runtime != "llama.cpp" else {}
            prefill = [
                _fmt(f["prefill_tok_s"].get(str(n)), ".1f", r.get(f"prefill {n}")) for n in lengths
            ]
            out.append(
                f"| {name} | {runtime} | {_fmt(f['decode_ms'], '.1f', r.get('decode'))} | "
                + " | ".join(prefill)
                + f" | {f['peak_rss'] / GB:.2f} | "
                f"{_fmt(f['model_adds'] / GB, '.2f', r.get('memory'))} | {f['load_s']:.2f} | "
                f"{_fmt(f['load_s'] + f['first_token_s'], '.2f', r.get('load'))} | "
                f"{f.get('measured_at', '?')} ({f['load_average']:.1f})"
                f"{', an earlier run' if f.get('reused') else ''} |"
            )
            first = f.get("first_load")
            if first is not None and not _ok(first):
                out.append(f"| {name} | {runtime}, first load | {first.get('error', '?')} |")
            elif first is not None:
                dashes = " | ".join("–" for _ in range(len(lengths) + 1))
                out.append(
                    f"| {name} | {runtime}, first load (converts; the cache empty) | {dashes} | "
                    f"{first['peak_rss'] / GB:.2f} | {first['model_adds'] / GB:.2f} | "
                    f"{first['load_s']:.2f} | "
                    f"{_fmt(first['load_s'] + first['first_token_s'], '.2f', r.get('first load'))}"
                    f" | {first.get('measured_at', '?')} ({first['load_average']:.1f}) |"
                )
    return out


def markdown(report: dict) -> str:
    m = report["meta"]
    out = [
        "# Ternary LMs on the CPU (`benchmarks/bench_cpu.py`)",
        "",
        f"Machine: {m['cpu']}, {m['cpus']} CPUs ({', '.join(m['isa'])}), {m['threads']} "
        f"threads for every runtime; commit {m['commit']}; {m['started']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        + f". Memory available at the start: {m['memory_available_gib']} GiB. Load average "
        f"{m['load_average_start'][0]:.1f} at the start, {m['load_average_end'][0]:.1f} at the "
        "end: the machine is shared with other work, so wall times are stretched by an "
        "unknown amount; compare within a config (its rows ran minutes apart).",
        "",
        "Same shapes and the same random ternary weights in every row; each runtime in its own "
        "process; decode = median ms of one greedy step after a prompt (median over rounds; "
        "prompt, steps and repeats per config in the JSON's `plan`); prefill = tokens/s of "
        "one forward over a fresh sequence (median); peak RSS = "
        "the process's maximum; model adds = RSS after the load and a first one-token forward "
        "minus RSS after the imports; load = loading the checkpoint folder (tribuild, "
        "transformers: safetensors, float layout) or the GGUF file (llama.cpp, mapped), and "
        "load + first token adds the first one-token forward (where llama.cpp reads its "
        "mapped weights). tribuild's row loads a second time, mapping what its first load "
        "converted and wrote to its weight cache (as llama.cpp maps the GGUF its converter "
        "wrote: that conversion is not timed); the row \"first load\" below it is the first "
        "load of the same folder, the cache empty: it reads and ternarizes the float32 "
        "checkpoint. Ratios in brackets are against llama.cpp. Each row gives the time "
        "its process ended and the 1-minute load average then; a row from an earlier run "
        "(`--reuse`: transformers and llama.cpp do not change with tribuild's code) ran the "
        "same spec, weights and harness. A runtime named NAME@N ran on N threads instead; "
        "its ratios are still against llama.cpp on the run's thread count. On a machine with "
        "more runnable threads than cores, llama.cpp's threads, which meet at a barrier after "
        "every operation of its graph, lose most while one waits for a core: compare "
        "llama.cpp@1 with llama.cpp where both ran.",
        "",
        *lm_table(report),
        "",
        "## Logits on the same weights",
        "",
        "| config | runtimes | max abs difference / max abs logit | same argmax |",
        "|---|---|---|---|",
    ]
    for name, config in report["configs"].items():
        for pair, a in config["agreement"].items():
            out.append(f"| {name} | {pair} | {a['max_rel_diff']:.2e} | {a['same_argmax']} |")
    k = report.get("kernels")
    if _ok(k):
        assert k is not None
        s = k["gemv_shape"]
        out += [
            "",
            "## GEMV and read bandwidth (same process, interleaved)",
            "",
            f"Decode GEMV [{s[0]}x{s[1]}]·[{s[2]}x{s[1]}]ᵀ through `launch.ternary_linear` "
            f"(backend `{k['backend']}`), over {k['layers']} weights (past the "
            f"{k['last_level_cache_bytes'] >> 20} MiB last-level cache); GB/s of the bytes a "
            "2-bit kernel must read.",
            "",
            "| figure | ms | GB/s | of read bandwidth |",
            "|---|---|---|---|",
            f"| read bandwidth (torch.sum over {k['read_bytes'] >> 20} MiB of float32) | | "
            f"{k['read_gb_s']:.1f} | 100% |",
            f"| tribuild BitLinear GEMV (int8 quantization in the call) | "
            f"{k['bitlinear_ms']:.3f} | {k['bitlinear_gb_s']:.1f} | "
            f"{k['bitlinear_gb_s'] / k['read_gb_s']:.0%} |",
            f"| tribuild ternary GEMV (float activations) | {k['ternary_ms']:.3f} | "
            f"{k['ternary_gb_s']:.1f} | {k['ternary_gb_s'] / k['read_gb_s']:.0%} |",
            *(
                [
                    f"| tribuild 8-bit head GEMV [1x{k['head_shape'][1]}]·"
                    f"[{k['head_shape'][2]}x{k['head_shape'][1]}]ᵀ (int8 bytes and scales) | "
                    f"{k['head_ms']:.3f} | {k['head_gb_s']:.1f} | "
                    f"{k['head_gb_s'] / k['read_gb_s']:.0%} |"
                ]
                if "head_ms" in k
                else []
            ),
            f"| float32 F.linear, same shape (float32 bytes) | {k['float_ms']:.3f} | "
            f"{k['float_gb_s']:.1f} | {k['float_gb_s'] / k['read_gb_s']:.0%} |",
        ]
    elif k:
        out += ["", f"GEMV figures did not run: {k.get('error')}"]
    res = report.get("resnet18")
    if _ok(res):
        assert res is not None
        out += [
            "",
            f"## ResNet-18, batch 1, input {res['input']}",
            "",
            "| runtime | ms | speed vs float32 |",
            "|---|---|---|",
            f"| tribuild (generated, -O2) | {res['ms']['tribuild']:.1f} | {res['speedup']:.2f}x |",
            f"| float32 PyTorch (the float twin, plain convs) | {res['ms']['float32']:.1f} | "
            "1.00x |",
            "",
            f"Largest output difference over the largest output: {res['max_rel_error']:.1e}.",
        ]
    elif res:
        out += ["", f"ResNet-18 did not run: {res.get('error')}"]
    out += [
        "",
        "## Goals (issue 34)",
        "",
        "| figure | goal | measured | met |",
        "|---|---|---|---|",
    ]
    for g in report["goals"]:
        met = {True: "met", False: "**not met**", None: "not measured"}[g["met"]]
        out.append(f"| {g['goal']} | {g['bound']} | {g['text']} | {met} |")
    return "\n".join(out) + "\n"
