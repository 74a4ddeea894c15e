"""How the CRS echo flag fares on near-copies of the user, and on the reference agents' own turns.

Prints figures, never passes or fails:

    python -m convsim run configs/crs_reference.yaml --sessions 12 --run-id ref12
    python bench/crs_echo_paraphrase.py runs/ref12                # rule paraphrases + reference turns
    python bench/crs_echo_paraphrase.py runs/ref12 --gemma 60     # + gemma3-270m restatements

For a run of configs/crs_reference.yaml it re-evaluates (``convsim.evaluation.crs.nodes.turn_evaluation``
of this tree) (a) every system turn of every variant: echo turns as the run recorded them and now;
(b) a light paraphrase of every distinct user turn (``light_paraphrase``: the last sentence first,
I -> you, "films" -> "flick", "written by" -> "writing of", a genre's adjective, filler before and
after) said back as the reply; (c) with ``--gemma N``, N user turns of the template variant
restated by gemma3-270m (few-shot completion, temperature 0, seed 1: the packaged model is a base
model, which answers a chat prompt with the prompt itself). Run it on two trees to compare.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GENRE_WORDS = {"horror": "scary", "comedy": "funny", "drama": "dramatic", "thriller": "suspenseful",
               "romance": "romantic", "animation": "animated", "crime": "criminal", "war": "wartime"}
SWAPS = [(r"\bI'm\b", "you're"), (r"\bI'd\b", "you'd"), (r"\bI\b", "you"), (r"\bmy\b", "your"), (r"\bme\b", "you"),
         (r"\bfilms?\b", "flick"), (r"\bmovies?\b", "flick"), (r"\bstarring\b", "stars"),
         (r"\bdirected by\b", "directing from"), (r"\bwritten by\b", "writing of"), (r"\bliked\b", "like"),
         (r"\benjoyed\b", "enjoy"), (r"\bplot\b", "storyline")]
FILLERS = ("Sure thing, friend! So ", "Absolutely wonderful question: ", "Okay! ", "Lovely. ")
TAILS = (", right?", " - noted with pleasure.", ", correct?", ", I hear you.")
RESTATE_SHOTS = """A movie assistant repeats what the customer asked, in its own words, in one sentence.

Customer: Can you suggest a good western film for tonight?
Assistant: So you'd like a good western movie to watch tonight.

Customer: I liked the cast of Heat. Who else is good in films directed by Michael Mann?
Assistant: You enjoyed the cast of Heat and want more movies that Michael Mann directed.

Customer: Let's change direction: show me films in French. I don't care about 1995 anymore.
Assistant: Okay, you now want French films, and 1995 no longer matters to you.

"""


def light_paraphrase(text: str, k: int) -> str:
    """The user's turn said back lightly changed: word order, inflection, a synonym or two, filler."""
    parts = [p for p in re.split(r"(?<=[.?!])\s+", text.strip()) if p]
    out = " ".join(parts[-1:] + parts[:-1])
    for pattern, word in SWAPS:
        out = re.sub(pattern, word, out)
    for genre, word in GENRE_WORDS.items():
        out = re.sub(rf"\b{genre}\b", word, out, flags=re.IGNORECASE)
    out = out.strip().rstrip("?.!")
    return FILLERS[k % 4] + out[:1].lower() + out[1:] + TAILS[k % 4]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--gemma", type=int, default=0, help="user turns restated by gemma3-270m")
    a = ap.parse_args()
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.catalog.movies.concepts import ConceptExtractor
    from convsim.evaluation.crs.nodes import TASSettings, turn_evaluation
    cat = load_movie_catalog()
    ex = ConceptExtractor(cat)

    def echo(user, text, meta=None, earlier=()):
        m, _ = turn_evaluation(user, {"turn": user["turn"], "text": text, "meta": meta or {}}, extractor=ex,
                               idf=cat.idf, settings=TASSettings(), earlier_named=set(earlier))
        return m["echo"]

    records = [json.loads(x) for x in (Path(a.run_dir) / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    shares, users = defaultdict(lambda: [0, 0, 0]), {}
    for r in records:
        agent = (r.get("params") or {}).get("crs_agent", "template")
        said = {e["turn"]: e for e in r["transcript"] if e["speaker"] == "user"}
        recorded = {t["turn"]: t["echo"] for t in r["turn_metrics"]}
        named: set = set()
        for e in (e for e in r["transcript"] if e["speaker"] == "system"):
            row = shares[agent]
            row[0], row[1], row[2] = row[0] + recorded[e["turn"]], row[1] + echo(said[e["turn"]], e["text"],
                                                                            e.get("meta"), named), row[2] + 1
            named |= set((e.get("meta") or {}).get("mentioned_ids") or [])
        users.update({(r["session_id"], t): u for t, u in said.items()})
    print("echo turns per variant (recorded -> this tree):")
    for agent, (before, now, n) in shares.items():
        print(f"  {agent:22s} {before}/{n} -> {now}/{n}")
    flagged = sum(echo(u, light_paraphrase(u["text"], u["turn"])) for u in users.values())
    print(f"light paraphrases of the user turns flagged: {flagged}/{len(users)}")
    if a.gemma:
        from llama_cpp import Llama

        from convsim.providers.llamacpp import gemma3_270m_path
        llama = Llama(model_path=str(gemma3_270m_path()), n_ctx=2048, verbose=False, seed=1)
        template = next(r for r in records if (r.get("params") or {}).get("crs_agent", "template") == "template")
        seen, restated = set(), []
        for r in (r for r in records if (r.get("params") or {}).get("crs_agent", "template") == "template"):
            for u in [e for e in r["transcript"] if e["speaker"] == "user"][::3]:
                if u["text"] not in seen and len(restated) < a.gemma:
                    seen.add(u["text"])
                    out = llama.create_completion(RESTATE_SHOTS + f"Customer: {u['text']}\nAssistant:", max_tokens=50,
                                                  temperature=0, stop=["\n"], seed=1)
                    restated.append((u, out["choices"][0]["text"].strip()))
        llama.close()
        hits = [(u["text"], s) for u, s in restated if echo(u, s)]
        print(f"gemma3-270m restatements flagged: {len(hits)}/{len(restated)} (template run {template['run_id']})")
        for u, s in restated:
            print(f"  {'ECHO' if (u['text'], s) in hits else '    '} {u['text']!r} -> {s!r}")


if __name__ == "__main__":
    main()
