"""``convsim fidelity``: every simulator variant of one or more runs against a human corpus, side by
side, with the human corpus against a held-out half of itself as the noise floor.

:func:`fidelity_report` returns a dict (``fidelity.json``), :func:`markdown` the table, and
:func:`write_fidelity` is the analysis hook that writes both into a run directory when the run's
params name a ``human_corpus`` (the report shows the section then).
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import yaml

from convsim import ConvsimError
from convsim.evaluation.fidelity import corpus
from convsim.evaluation.fidelity.discriminator import discriminate
from convsim.evaluation.fidelity.features import MEASURES, context, distance_table, split_reference

HUMAN_SPLIT = "human_split"


def _label(run_dir: Path, variant: str, several_runs: bool) -> str:
    if not several_runs:
        return variant
    return run_dir.name if variant == "default" else f"{run_dir.name}/{variant}"


def compare(human: Sequence[dict], variants: dict[str, list[dict]], *, n_boot: int = 200, seed: int = 0,
            discriminator: bool = True, floor: bool = True) -> dict:
    """The figures for simulated dialogue sets (``{label: dialogues}``) against ``human``; with
    ``floor``, a ``human_split`` column: one random half of the human corpus against the other."""
    ctx, _ = context(human, seed)
    columns = {}
    if floor:
        a, b = split_reference(human, seed + 101)
        columns[HUMAN_SPLIT] = (b, a)  # (human side, "simulated" side)
    for label, sims in variants.items():
        columns[label] = (list(human), sims)
    out = {"measures": list(MEASURES), "columns": {}, "n_human": len(human)}
    for label, (hum, sims) in columns.items():
        if not sims:
            out["columns"][label] = {"n_dialogues": 0, "note": "no dialogue of the human corpus's task"}
            continue
        c = context(hum, seed)[0] if label == HUMAN_SPLIT else ctx
        entry = {"n_dialogues": len(sims), "n_turns": sum(len(d["turns"]) for d in sims),
                 "distances": distance_table(hum, sims, n_boot=n_boot, seed=seed, ctx=c)}
        if discriminator:
            entry["auc_turn"] = discriminate(hum, sims, level="turn", seed=seed)
            entry["auc_dialogue"] = discriminate(hum, sims, level="dialogue", seed=seed)
        out["columns"][label] = entry
    return out


def fidelity_report(run_dirs: str | Path | Sequence[str | Path], human: str | Path, *,
                    domains: Sequence[str] | None = None, n_boot: int = 200, seed: int = 0,
                    discriminator: bool = True) -> dict:
    """Each run's variants (their dialogues whose goal lies within the human corpus's domains, or
    ``domains``) against the human corpus ``human``."""
    dirs = [Path(run_dirs)] if isinstance(run_dirs, (str, Path)) else [Path(p) for p in run_dirs]
    people = corpus.load_human(human)
    task = set(domains) if domains else corpus.corpus_domains(people)
    variants, kept = {}, {}
    for run_dir in dirs:
        for v, dialogues in corpus.load_run(run_dir).items():
            label = _label(run_dir, v, len(dirs) > 1)
            variants[label] = corpus.same_task(dialogues, task) if task else dialogues
            kept[label] = {"sessions": len(dialogues), "same_task": len(variants[label])}
    out = compare(people, variants, n_boot=n_boot, seed=seed, discriminator=discriminator)
    out.update(human_file=str(human), runs=[str(d) for d in dirs], domains=sorted(task), kept=kept, seed=seed,
               n_boot=n_boot)
    return out


def _num(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) else str(x)


def markdown(report: dict) -> str:
    """The side-by-side table: per measure, the human value, then per column the simulated value
    and the distance [95% CI]; then the discriminator AUCs and the most telling features."""
    cols = [c for c, e in report["columns"].items() if e.get("n_dialogues")]
    lines = []
    if report.get("human_file"):
        lines.append(f"Human corpus: {report['human_file']} ({report['n_human']} dialogues; task domains "
                     f"{', '.join(report.get('domains') or []) or 'all'}). {HUMAN_SPLIT}: one half of the human corpus "
                     "against the other (the noise floor).")
        for label, k in (report.get("kept") or {}).items():
            lines.append(f"- {label}: {k['same_task']} of {k['sessions']} sessions have a goal within the task domains")
        lines.append("")
    head = "| measure | human | " + " | ".join(f"{c}: value | {c}: distance [95% CI]" for c in cols) + " |"
    lines += [head, "|" + "---|" * (2 + 2 * len(cols))]
    for m in report["measures"]:
        first = next((r for c in cols for r in report["columns"][c]["distances"] if r["measure"] == m), None)
        if first is None:
            continue
        human_value = next((r["human"] for c in cols if c != HUMAN_SPLIT for r in report["columns"][c]["distances"]
                            if r["measure"] == m), first["human"])
        cells = []
        for c in cols:
            r = next(r for r in report["columns"][c]["distances"] if r["measure"] == m)
            value = _num(r["simulated"])
            if _num(r["human"]) != _num(human_value):  # distinct-n on equal-sized samples; oov on the other half
                value += f" (human {_num(r['human'])})"
            cells += [value, f"{_num(r['distance'])} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"]
        lines.append(f"| {m} ({first['distance_kind']}) | {_num(human_value)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += ["| discriminator ROC AUC (0.5 = indistinguishable) | " + " | ".join(cols) + " |",
              "|---|" + "---|" * len(cols)]
    for level in ("turn", "dialogue"):
        cells = []
        for c in cols:
            a = report["columns"][c].get(f"auc_{level}") or {}
            cells.append(f"{_num(a.get('auc'))} [{_num(a.get('ci_low'))}, {_num(a.get('ci_high'))}] "
                         f"(n {a.get('n_human', '?')} vs {a.get('n_simulated', '?')})" if a else "—")
        lines.append(f"| {level}s | " + " | ".join(cells) + " |")
    lines.append("")
    for c in cols:
        a = report["columns"][c].get("auc_turn") or {}
        if a.get("telling"):
            feats = "; ".join(f"{t['feature']!s} ({t['leans']}, {t['weight']:+.2f})" for t in a["telling"])
            lines.append(f"- most telling turn features, {c}: {feats}")
    return "\n".join(lines) + "\n"


def write_fidelity(run_dir: str | Path) -> dict | None:
    """Analysis hook: when the run's params (or a variant's) name a ``human_corpus``, write
    ``fidelity.json`` and ``fidelity.md`` into the run directory and print the table (and rebuild
    report.html when the report hook ran before this one, so it shows the section)."""
    run_dir = Path(run_dir)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    path = (cfg.get("params") or {}).get("human_corpus")
    if not path:
        return None
    p = Path(path)
    if not p.is_absolute():
        p = (Path(__file__).resolve().parents[2] / p).resolve()  # as the graph resolves its paths
    if not p.exists():
        raise ConvsimError("human corpus not found", file=run_dir / "config.yaml", field="params.human_corpus")
    report = fidelity_report(run_dir, p)
    (run_dir / "fidelity.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    text = markdown(report)
    (run_dir / "fidelity.md").write_text(text, encoding="utf-8")
    print("Simulator fidelity against the human corpus")
    print(text)
    if (run_dir / "report.html").exists():  # the report hook ran first: rebuild it with the section
        from convsim.evaluation.reporting.report import build_report
        build_report(run_dir)
    return report
