"""Re-score a paper-mode crs_shift run with the paper's topic word filter (``_filter_topics``).

    python bench/crs_paper_topic_filter.py runs/<id> [dominant]

The paper's code passed segment and system topics (not the detector's) through a hand-made list
(DOMAIN_HINTS and a regex: romance, horror, drama, space, ghost, love, fear, dark, ...). This applies
that filter to convsim's LDA words, with the paper's detector (OR, consecutive), the paper's search
to the end of the dialogue and the paper's TF-IDF, and prints per variant the shifts, the
recovery rate, the delay and how many replies kept a topic. ``dominant``: the paper's
dominant-topic words. docs/crs_shift.md "Deviations and decisions" quotes its output.
"""
import json, re, statistics, sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.evaluation.crs.nodes import scored_transcript
from convsim.evaluation.crs.tas_cas_eval import _embedder, topic_extractor, turn_pairs, VectorSim
from convsim.evaluation.crs.tas_cas import detect_shifts, shift_outcomes_to_end, recovery_components
from convsim.evaluation.crs.topics import LdaTopics
from convsim.graphs.crs_shift import catalog_location
DOMAIN_HINTS = {"romance","horror","sci-fi","science fiction","drama","comedy","thriller","actor","actors","cast","director","plot","ending","mood","emotional","gore","space","aliens","ghost","jump scare","recommendation","movie","film"}
IRR = {"recommendation","conversation","system","response","chat","user","talk","suggestion","question","answer","film","movie","thing","stuff"}
RX = re.compile(r"(love|fear|sad|happy|romantic|tense|dark|futur|drama|emot|space|ghost|sci)")
def filt(ts):
    return {t for t in ts if t not in IRR and len(t) >= 2 and (any(k in t for k in DOMAIN_HINTS) or RX.search(t))}
run = Path(sys.argv[1]); dominant = len(sys.argv) > 2
recs = [json.loads(l) for l in (run/"results.jsonl").open()]
params = recs[0]["params"]
cat = load_movie_catalog(catalog_location(params.get("catalog_path")))
topics = topic_extractor("lda", cat, str(run))
if dominant:
    topics = LdaTopics(topics.vectorizer, topics.lda, top_words=5, min_prob=0.1, dominant=True)
emb = _embedder("tfidf", cat, "paper")
out = defaultdict(lambda: {"rate": [], "delay": [], "shifts": [], "kept": 0, "all": 0})
for r in recs:
    pairs = turn_pairs(scored_transcript(r["transcript"]))
    u = [p[0]["text"] for p in pairs]; s = [p[1]["text"] for p in pairs]
    ut = topics.topics_many(u); st = topics.topics_many(s)
    sim = VectorSim(emb, u + s)
    shifts = detect_shifts(u, ut, sim=sim, rule="or", compare="consecutive")
    b = [0, *shifts, len(u)]
    seg = [filt(t) for t in topics.topics_many([" ".join(u[x:y]) for x, y in zip(b, b[1:])])]
    fst = [filt(t) for t in st]
    o = out[r["variant"]]; o["kept"] += sum(bool(t) for t in fst); o["all"] += len(fst)
    c = recovery_components(shift_outcomes_to_end(shifts, ut, fst, sim=sim, segment_topics=seg))
    o["shifts"].append(len(shifts))
    if c["topic_recovery_rate"] is not None: o["rate"].append(c["topic_recovery_rate"])
    if c["avg_recovery_delay"] is not None: o["delay"].append(c["avg_recovery_delay"])
for v, o in out.items():
    print(f"{v:12} shifts {statistics.mean(o['shifts']):.2f} rate {statistics.mean(o['rate']):.3f} delay {statistics.mean(o['delay']) if o['delay'] else float('nan'):.3f} (n={len(o['delay'])}) replies with topics after the filter {o['kept']}/{o['all']}")
