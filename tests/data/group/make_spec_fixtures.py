"""Writes the spec-format fixtures from one simulated C4 session (run from the repo root:
``PYTHONPATH=. python tests/data/group/make_spec_fixtures.py``).

- ``c4_project_format.csv``: the project's own export (``meta`` column, project plan keys).
- ``c4_spec_format.csv``: the same dialogue in the spec's columns (speaker, intent, utterance,
  constraint_state, plan, ref_info_*) without ``meta``: the metadata are plain columns and the plan
  uses the spec's literal keys (meals / accommodations / attractions / events / poi_list).
- ``spec_columns_only_C4.csv``: only the spec's columns, no metadata at all (flags from the file
  name; the reader warns).
"""

import csv
import json
import re
from pathlib import Path

from convsim import stable_seed
from convsim.evaluation.group.dialogue_csv import export_group_csv
from convsim.graphs.group_planning import Context, Params, graph, sessions

HERE = Path(__file__).parent
SPEC_COLUMNS = ["speaker", "intent", "utterance", "constraint_state", "plan", "ref_info_accommodations",
                "ref_info_restaurants", "ref_info_attractions", "ref_info_events"]
META_COLUMNS = ["multi_user", "enable_synthesis", "use_social_theory", "enable_feedback", "member_count",
                "preference_option", "preference_reject", "house_rule", "has_conflict",
                "resolution_explanation", "resolution_strategy"]
_TIME = re.compile(r"^(.*?), (?:visit|stay) from (\d\d:\d\d) to (\d\d:\d\d)")


def spec_plan(plan: dict) -> dict:
    days = []
    for d in plan["days"]:
        names = [x for x in d["attraction"].split(";") if x.strip()]
        pois = []
        for part in d["point_of_interest_list"].split(";"):
            m = _TIME.match(part)
            pois.append({"name": m.group(1), "start": m.group(2), "end": m.group(3)} if m else part)
        days.append({"day": d["days"], "date": d["date"], "current_city": d["current_city"],
                     "meals": {k: d[k] for k in ("breakfast", "lunch", "dinner")},
                     "accommodations": d["accommodation"], "attractions": names,
                     "events": [] if d["event"] == "-" else [d["event"]], "poi_list": pois,
                     "subgroups": d["subgroups"]})
    return {**{k: v for k, v in plan.items() if k != "days"}, "days": days}


def main() -> None:
    p = Params(condition="C4", n_sessions=1)
    s = next(iter(sessions(p, Context(params=p, seed=3))))
    state = graph.invoke(s, context=Context(params=p, seed=stable_seed(3, s["session_id"]), session_id=s["session_id"]))
    project = export_group_csv(state, HERE / "c4_project_format.csv")
    with project.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for name, with_meta in (("c4_spec_format.csv", True), ("spec_columns_only_C4.csv", False)):
        with (HERE / name).open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=SPEC_COLUMNS + (META_COLUMNS if with_meta else []))
            w.writeheader()
            for r in rows:
                out = {k: r.get(k, "") for k in SPEC_COLUMNS}
                if r["plan"]:
                    out["plan"] = json.dumps(spec_plan(json.loads(r["plan"])))
                if with_meta:
                    meta = json.loads(r["meta"])
                    for k in META_COLUMNS:
                        if k in meta and meta[k] is not None:
                            v = meta[k]
                            out[k] = json.dumps(v) if not isinstance(v, str) else v
                w.writerow(out)


if __name__ == "__main__":
    main()
