"""How the answer check's language test (convsim/providers/answer_language.py) fares on a labelled
set: its false-failure rate on real English turns and its detection rate on well-formed nonsense.

Prints figures, never passes or fails:

    python bench/answer_language.py                       # runs the shipped scenarios offline first
    python bench/answer_language.py --runs runs/a runs/b  # turns of runs already made (results.jsonl)

English (must pass):
* WOZ 2.0 human turns, user and system (``../shared/data/woz2/dialogues.json``);
* MultiWOZ 2.1 human turns of the sample (``../shared/data/multiwoz/dialogues_unified_sample.json``);
* OpenDialKG film plots (``../shared/data/opendialkg``): English written by others, about films
  the shipped catalog may not hold;
* every turn of the shipped scenarios (crs_shift, customer_service, group_planning, hello_chat;
  offline models, ``--sessions`` each);
* short answers: yes/no answers and every film title of the catalog.
Nonsense (must fail):
* lorem ipsum, 4 to 40 words drawn from the classic placeholder text;
* word salads: 6 to 30 words drawn from the shipped vocabulary without stop words;
* replies in 13 other languages (``tests/data/nonsense_answers.json``);
* the fault server's ``garbage`` and ``nonsense`` answers (tests/fault_server.py).
And, as a measured limit, *shuffled English*: the words of a real turn in a random order (8 words
or more): the check sees words, not their order, so these pass.

Vocabulary: what the shipped nodes pass (convsim.agents.language.node_vocabulary: the shipped data,
prompt templates and group labels); no turn gets its prompt's words (a node adds them: fewer
failures, not more).
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

SHARED = ROOT.parent / "shared" / "data"
LOREM = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et "
         "dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco laboris nisi ut aliquip "
         "ex ea commodo consequat duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu "
         "fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt in culpa qui officia deserunt "
         "mollit anim id est laborum").split()
SCENARIOS = ("crs_shift", "customer_service", "group_planning", "hello_chat")


def lorem(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = [rng.choice(LOREM) for _ in range(rng.randint(4, 40))]
        out.append(" ".join(words).capitalize() + ".")
    return out


def salad(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(6, 30))).capitalize() + "." for _ in range(n)]


def shuffled(rng: random.Random, texts: list[str], n: int) -> list[str]:
    long = [t.split() for t in texts if len(t.split()) >= 8]
    out = []
    for words in rng.sample(long, min(n, len(long))):
        words = list(words)
        rng.shuffle(words)
        out.append(" ".join(words))
    return out


def human_turns() -> dict[str, list[str]]:
    sets: dict[str, list[str]] = {}
    woz = json.loads((SHARED / "woz2" / "dialogues.json").read_text())
    for d in woz:
        for t in d["turns"]:
            sets.setdefault(f"WOZ 2.0 {t['speaker']} turns", []).append(t["utterance"])
    mw = json.loads((SHARED / "multiwoz" / "dialogues_unified_sample.json").read_text())
    sets["MultiWOZ 2.1 turns"] = [t["utterance"] for d in mw for t in d["turns"]]
    kg = json.loads((SHARED / "opendialkg" / "opendialkg_movie_data.json").read_text())
    sets["OpenDialKG film plots"] = [m["plot"] for m in kg.values() if isinstance(m.get("plot"), str) and m["plot"].strip()]
    return sets


def scenario_turns(run_dirs: list[Path]) -> dict[str, list[str]]:
    sets: dict[str, list[str]] = defaultdict(list)
    for run_dir in run_dirs:
        for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            graph = Path(str(rec.get("graph") or run_dir.name)).stem
            for e in rec.get("transcript") or []:
                who = "user" if e["speaker"] == "user" else ("system" if e["speaker"] in ("system", "agent")
                                                            else "member")
                sets[f"{graph} {who} turns"].append(e["text"])
    return dict(sets)


def run_scenarios(sessions: int) -> list[Path]:
    out = Path(tempfile.mkdtemp(prefix="answer_language_"))
    dirs = []
    for g in SCENARIOS:
        subprocess.run([sys.executable, "-m", "convsim.cli", "run", g, "--sessions", str(sessions), "--quiet",
                        "--no-analysis", "--out", str(out), "--run-id", g], check=True, cwd=ROOT)
        dirs.append(out / g)
    return dirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="*", type=Path, help="run directories (default: run the shipped scenarios)")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=5, help="failing English examples shown per set")
    args = ap.parse_args()

    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.agents.language import node_vocabulary
    from convsim.providers.answer_language import CHAT_WORDS, language_defect, stop_words
    from fault_server import GARBAGE, NONSENSE

    vocab = node_vocabulary()
    rng = random.Random(args.seed)
    english = human_turns()
    english.update(scenario_turns(args.runs if args.runs is not None else run_scenarios(args.sessions)))
    english["short answers (yes/no, film titles)"] = (
        ["Yes.", "No.", "Yes, please.", "No, thanks.", "Sure!", "OK", "Thank you.", "Goodbye."]
        + [m.title for m in load_movie_catalog().movies])
    foreign = json.loads((ROOT / "tests" / "data" / "nonsense_answers.json").read_text(encoding="utf-8"))
    content = sorted(vocab - stop_words())
    nonsense = {"lorem ipsum (4-40 words)": lorem(rng, 300),
                "word salad of shipped words (6-30)": salad(rng, content, 300),
                **{f"other language: {k}": v for k, v in foreign.items() if not k.startswith("_")},
                "fault server garbage/nonsense": [GARBAGE, *NONSENSE]}
    all_english = [t for v in english.values() for t in v]
    limit = {"shuffled English turns (limit)": shuffled(rng, all_english, 300)}

    print(f"vocabulary: {len(vocab)} words of the shipped data, prompts and labels + {len(stop_words())} "
          f"stop words and contraction pieces + {len(CHAT_WORDS)} chat words\n")
    print(f"{'English set (must pass)':<44}{'n':>7}{'failed':>8}{'rate':>8}")
    fails_total = n_total = 0
    shown: dict[str, list] = {}
    reasons: Counter = Counter()
    for name, texts in english.items():
        bad = [(t, language_defect(t, vocabulary=vocab)) for t in texts]
        bad = [(t, why) for t, why in bad if why]
        fails_total += len(bad)
        n_total += len(texts)
        reasons.update(why.split(":")[0] + ": " + why.split("(")[-1].rstrip(")") if "(" in why else why for _, why in bad)
        shown[name] = bad[:args.show]
        print(f"{name:<44}{len(texts):>7}{len(bad):>8}{len(bad) / len(texts):>8.2%}")
    print(f"{'all English':<44}{n_total:>7}{fails_total:>8}{fails_total / n_total:>8.2%}\n")
    print(f"{'nonsense set (must fail)':<44}{'n':>7}{'caught':>8}{'rate':>8}")
    caught_total = n_non = 0
    for name, texts in {**nonsense, **limit}.items():
        caught = sum(language_defect(t, vocabulary=vocab) is not None for t in texts)
        if name not in limit:
            caught_total += caught
            n_non += len(texts)
        else:
            print(f"{'all nonsense':<44}{n_non:>7}{caught_total:>8}{caught_total / n_non:>8.2%}")
        print(f"{name:<44}{len(texts):>7}{caught:>8}{caught / len(texts):>8.2%}")
    print("\nEnglish turns that fail:")
    for name, bad in shown.items():
        for t, why in bad:
            print(f"  [{name}] {t[:100]!r}\n      {why}")


if __name__ == "__main__":
    main()
