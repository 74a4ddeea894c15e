"""The group-planning gaming references and the headline metrics none of them may win.

``configs/group_reference.yaml`` runs, on C4's dialogue and paired sessions, beside the baseline C4:

* ``gaming``: every meal at one restaurant, every wish pasted into the plan's text;
* ``place_everything``: the condition's plan plus every restaurant, attraction, event and stay of
  the city on day 1, untimed (scored as a plan: precision and the over-full cap,
  ``evaluation/group/plan_feasibility.py``; members judge it by their own view,
  ``agents/group/member_view.py``);
* ``alarmist``: a conflict reported on every slot;
* ``self_reporter``: the self-reporting talker (first member heard; conflict, ``include_both``,
  pasted wishes and one fake feedback exchange on every slot); ``self_reporter_c5`` is the same
  talker on C5's dialogue, against C5, where M5 applies.

``write_group_gaming_check(run_dir)`` is the run's analysis hook (``evaluation/gaming.py``): it
writes ``gaming_check.md`` / ``.json`` and prints whether any of them beats C4 on a headline metric
(the graph's SUMMARY_METRICS that a planner can move, each in its good direction).
M2-M5 are computed from behaviour (``convsim.evaluation.group.metrics``), so the self-reporting
talker's claims no longer score: it loses M2 (precision), M3 (pasted wishes), M4 (include_both with
one option placed) and M5 (fake feedback) (docs/group_planning.md).
"""
from __future__ import annotations

from pathlib import Path

from convsim.evaluation.gaming import write_gaming_check

GAMING = {"gaming": "C4", "place_everything": "C4", "alarmist": "C4", "self_reporter": "C4",
          "self_reporter_c5": "C5"}
HEADLINE = {**{m: ("metrics", True) for m in ("W1", "W2", "W3", "M2", "M3", "M4", "M5", "M6", "M9",
                                               "M10", "M11", "M16", "W1_all_members", "W2_all_members",
                                               "W3_all_members")},
            **{m: ("metrics", False) for m in ("W3_zero_members", "M2_false_alarm", "M4b")}}


def write_group_gaming_check(run_dir: str | Path) -> list[dict]:
    return write_gaming_check(Path(run_dir), GAMING, HEADLINE)
