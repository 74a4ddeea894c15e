"""Synthetic run directories for the analysis tests (what the engine writes, made by hand)."""

import json
from pathlib import Path

import numpy as np
import yaml

XSS = "<script>alert(1)</script>"


def make_record(variant: str, session: int, rng, *, quality: float, xss: bool = False) -> dict:
    transcript, turn_metrics = [], []
    for t in range(1, 7):
        shift = t in (3, 5)
        transcript.append({"turn": t, "speaker": "user", "text": f"user says {t}" + (f" {XSS}" if xss and t == 2 else ""),
                           "meta": {"user_meta": {"turn": t, "focus_field": "genre", "focus_value": f"G{t // 3}",
                                                  "constraints": {"genre": f"G{t // 3}"}, "shift_event": shift,
                                                  "anchor": f"m{t}"}}})
        transcript.append({"turn": t, "speaker": "system", "text": f"system answers {t}",
                           "meta": {"top_k": [f"m{t}", "m99"]}})
        turn_metrics.append({"turn": t, "tas_grounded": float(np.clip(quality + rng.normal(0, 0.1), -1, 1))})
    dm = {"tas_grounded": float(np.mean([m["tas_grounded"] for m in turn_metrics])),
          "tas_cas": float(quality / 2 + rng.normal(0, 0.05)),
          "judge_proactiveness": float(np.clip(round(3 + 2 * quality + rng.normal(0, 0.5)), 1, 5)),
          "judge_coherence": float(np.clip(round(3 + quality + rng.normal(0, 0.5)), 1, 5)),
          "judge_personalization": float(np.clip(round(2 + 2 * quality + rng.normal(0, 0.5)), 1, 5)),
          "judge_failed": 0, "judge_heuristic": 1, "n_turns": 6}
    return {"run_id": "synthetic", "variant": variant, "session_id": f"s{session:03d}", "trial": 0,
            "seed": 1000 + session, "status": "ok", "error": None, "models": {"crs": {"spec": variant}},
            "params": {}, "llm_calls": [], "elapsed_s": 0.01, "transcript": transcript,
            "turn_metrics": turn_metrics, "dialogue_metrics": dm,
            "judge_verdict": {"judge": "pepper", "method": "heuristic", "raw": XSS if xss else None}}


def make_run(tmp: Path, *, variants=("none", "llamacpp:gemma3-270m", "ollama:qwen:7b"), sessions: int = 12,
             seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    run_dir = tmp / "run_synthetic"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"name": "synthetic", "sessions": sessions,
                                                        "variants": [{"name": v} for v in variants]}))
    with open(run_dir / "results.jsonl", "w") as fh:
        for j, v in enumerate(variants):
            for s in range(sessions):
                rec = make_record(v, s, rng, quality=0.2 + 0.15 * j, xss=(j == 0 and s == 0))
                fh.write(json.dumps(rec) + "\n")
    return run_dir
