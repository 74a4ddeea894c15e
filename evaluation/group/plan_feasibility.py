"""Plans scored as plans: what a member would live through, and what an over-full plan loses.

An independent review's planner appended every restaurant, attraction, event and stay of the city
to day 1 (untimed) and scored W1 = W2 = W3 = M10 = M11 = 1.0, above the oracle: satisfaction read
*any* placed item, however many, whenever (and whether the stay allowed the member's dog). Now the
satisfaction metrics read the **lived plan** and are scaled by the plan's **precision**:

Lived items (``lived_plan``), per day, in the order the plan lists them:

* **budget** (``DAY_BUDGET``): breakfast, lunch, dinner 1 place each, attractions 3, events 1,
  one stay per night (the ``accommodation`` field; subgroup branches in ``accommodation_branches``
  are their members' stays). Items past a field's budget are *over budget*;
* **timed**: an attraction or event is lived only with a visit window ("Name, visit from HH:MM to
  HH:MM") in the day's ``point_of_interest_list``, when the day gives any windows (a day without
  any is read as untimed, noted in ``plan_untimed_days``); windows must not overlap (M16's rule):
  an item whose window starts before the previous one ends is *infeasible*;
* **grounded**: an item the catalog does not know is not lived (M9 counts it);
* **capacity**: an entire home must hold the group (``max_occupancy`` >= member count; private and
  shared rooms are let per room, as the planner books them), else the stay is *infeasible*.

House rules are scored per member (``house_rule_ok``): a lodging wish that names a house rule
("pets must be allowed", "a no smoking place", "parties are banned", "children under 10 must be
allowed", "visitors should be allowed") is satisfied only if some lived stay of the plan keeps it
("No pets" does not satisfy "pets must be allowed"). The lodging pair is then unsatisfied whatever
the other channels say.

Precision and the hard cap (``plan_quality``)::

    P = lived items / placed items                   (plan_precision; 1 for a plan that lives all it places)
    Q = 0 if some day places more than OVERFULL_FACTOR x its budget (an over-full plan), else P
    s_i' = s_i(lived plan, house rules) x Q          (per member)
    W1-W3 from s_i';  M10 = satisfied pairs / pairs x Q;  M10b = category pairs met / pairs x Q;
    M11 = members with s_i' = 1 / members

so a plan that places everything loses (P falls with every unlived item; past twice the day's
budget every member's satisfaction is 0), and an honest plan that lives all it places scores as
before. The counts are reported: ``plan_placed``, ``plan_lived``, ``plan_over_budget``,
``plan_untimed``, ``plan_infeasible``, ``plan_overfull_days``.
"""
from __future__ import annotations

import re

from convsim.catalog.travel import TravelDB, normalize_place_name
from convsim.evaluation.group.plan_parse import _split_places, poi_parts

DAY_BUDGET = {"breakfast": 1, "lunch": 1, "dinner": 1, "attraction": 3, "event": 1, "accommodation": 1}
TIMED_FIELDS = ("attraction", "event")
OVERFULL_FACTOR = 2
_WINDOW = re.compile(r"^\s*(.+?),\s*(?:visit|stay)\s+from\s+(\d{1,2}):(\d{2})\s+to\s+(\d{1,2}):(\d{2})", re.I)

# house-rule wish (its words in a member's lodging text) -> a stay's house_rules keeps it
HOUSE_RULE_WISHES = {
    "pets_allowed": (re.compile(r"\bpets?\b(?![^.]*\b(banned|not allowed)\b)", re.I),
                     lambda rules: "no pets" not in rules),
    "children_allowed": (re.compile(r"\bchildren\b[^.]*\ballowed\b", re.I),
                         lambda rules: "no children" not in rules),
    "no_smoking": (re.compile(r"\bno[ -]smoking\b|\bnon[- ]smoking\b", re.I), lambda rules: "no smoking" in rules),
    "quiet": (re.compile(r"\bparties\b[^.]*\bbanned\b|\bno parties\b", re.I), lambda rules: "no parties" in rules),
    "visitors_allowed": (re.compile(r"\bvisitors\b[^.]*\ballowed\b", re.I), lambda rules: "no visitors" not in rules),
}


def house_rule_wishes(text: str) -> list[str]:
    """The house rules a lodging wish names (ids of ``HOUSE_RULE_WISHES``)."""
    if re.search(r"\bno pets\b", text or "", re.I):  # "no pets" asks for none: not a pets_allowed wish
        text = re.sub(r"\bno pets\b", "", text, flags=re.I)
    return [k for k, (pattern, _) in HOUSE_RULE_WISHES.items() if pattern.search(text or "")]


def house_rule_ok(text: str, stays: list[dict]) -> bool | None:
    """Some stay keeps every house rule the wish names; None when the wish names none."""
    wishes = house_rule_wishes(text)
    if not wishes:
        return None
    return any(all(HOUSE_RULE_WISHES[w][1](str(s.get("house_rules") or "").lower()) for w in wishes)
               for s in stays)


def _windows(day: dict) -> list[tuple[str, int, int]]:
    out = []
    for part in poi_parts(day):
        m = _WINDOW.match(part)
        if m:
            h1, m1, h2, m2 = map(int, m.groups()[1:])
            out.append((normalize_place_name(m.group(1)), h1 * 60 + m1, h2 * 60 + m2))
    return out


def lived_plan(plan: dict, db: TravelDB, *, group_size: int) -> tuple[dict, dict]:
    """``(lived, counts)``: the plan reduced to the items a member would live through (rules in
    the module docstring), in the plan's own day schema, and the counts of what was dropped."""
    counts = {"plan_placed": 0, "plan_lived": 0, "plan_over_budget": 0, "plan_untimed": 0,
              "plan_infeasible": 0, "plan_ungrounded": 0, "plan_overfull_days": 0, "plan_untimed_days": 0}
    days = []
    for day in plan.get("days") or []:
        if not isinstance(day, dict):
            continue
        windows = _windows(day)
        timed = {n: (a, b) for n, a, b in windows}
        if not windows:
            counts["plan_untimed_days"] += 1
        placed_today = 0
        new = dict(day)
        kept: dict[str, list[tuple[str, str]]] = {}
        for field, budget in DAY_BUDGET.items():
            names = _split_places(day.get(field))
            placed_today += len(names)
            counts["plan_placed"] += len(names)
            kept[field] = []
            for i, name in enumerate(names):
                hit = db.lookup(name)
                if i >= budget:
                    counts["plan_over_budget"] += 1
                elif hit is None:
                    counts["plan_ungrounded"] += 1
                elif field in TIMED_FIELDS and windows and normalize_place_name(name) not in timed:
                    counts["plan_untimed"] += 1
                elif (field == "accommodation" and hit[1].get("roomType") == "entire_room"
                      and int(hit[1].get("max_occupancy") or 0) < group_size
                      and not plan.get("accommodation_branches")):
                    counts["plan_infeasible"] += 1
                else:
                    kept[field].append((normalize_place_name(name), f"{name}, {TravelDB.city_of(hit[1])}"))
        # overlapping visit windows: the later of two lived items cannot be lived
        names_kept = {n for items in kept.values() for n, _ in items}
        spans = sorted((a, b, n) for n, a, b in windows if n in names_kept)
        clash, end_ = set(), None
        for a, b, n in spans:
            if end_ is not None and a < end_:
                clash.add(n)
                continue
            end_ = b
        for field in TIMED_FIELDS:
            before = len(kept[field])
            kept[field] = [(n, full) for n, full in kept[field] if n not in clash]
            counts["plan_infeasible"] += before - len(kept[field])
        for field, items in kept.items():
            text = ";".join(full for _, full in items)
            new[field] = (text + (";" if field == "attraction" else "")) if items else "-"
        lived_names = {n for items in kept.values() for n, _ in items}
        new["point_of_interest_list"] = ";".join(
            p for p in str(day.get("point_of_interest_list") or "").split(";")
            if (m := _WINDOW.match(p)) and normalize_place_name(m.group(1)) in lived_names)
        new["subgroups"] = day.get("subgroups") or []
        if placed_today > OVERFULL_FACTOR * sum(DAY_BUDGET.values()):
            counts["plan_overfull_days"] += 1
        days.append(new)
    lived = {**plan, "days": days}
    lived.pop("as_proposed", None)
    counts["plan_lived"] = sum(len(_split_places(d.get(f))) for d in days for f in DAY_BUDGET)
    return lived, counts


def plan_quality(counts: dict) -> dict:
    """``plan_precision`` P and the factor Q applied to satisfaction (module docstring)."""
    placed = counts.get("plan_placed") or 0
    p = counts["plan_lived"] / placed if placed else None
    q = 0.0 if counts.get("plan_overfull_days") else (1.0 if p is None else p)
    return {"plan_precision": p, "plan_quality_factor": q}


def lived_stays(lived: dict, db: TravelDB) -> list[dict]:
    """The catalog records of every stay of the lived plan (day stays and subgroup branches)."""
    out = []
    names = [n for d in lived.get("days") or [] for n in _split_places(d.get("accommodation"))]
    names += [n for b in lived.get("accommodation_branches") or [] for n in _split_places(b.get("accommodation"))]
    for n in names:
        hit = db.lookup(n)
        if hit and hit[0] == "accommodations":
            out.append(hit[1])
    return out


def plan_satisfaction(preferences: dict, *, plan: dict, db: TravelDB, embedder, group_size: int) -> dict:
    """M10, M10b, M11 and W1-W3 of a plan scored as a plan (module docstring), with the counts,
    ``plan_precision`` and ``plan_quality_factor``; also the table (``"table"``) and the per-member
    rates s_i' (``"rates"``)."""
    from convsim.evaluation.group.metrics import welfare
    from convsim.evaluation.group.plan_metrics import CATEGORY_SLOTS, satisfaction_table

    lived, counts = lived_plan(plan, db, group_size=group_size)
    quality = plan_quality(counts)
    q = quality["plan_quality_factor"]
    table = satisfaction_table(preferences, plan=lived, db=db, embedder=embedder)
    stays = lived_stays(lived, db)
    for (member, slot), ch in table.items():
        if slot == "lodging":
            ch["house_rules"] = house_rule_ok(preferences[(member, slot)], stays)
            if ch["house_rules"] is False:
                ch["satisfied"] = False
    per: dict[str, list[bool]] = {}
    for (m, _), ch in table.items():
        per.setdefault(m, []).append(bool(ch["satisfied"]))
    rates = {m: q * sum(v) / len(v) for m, v in per.items()}
    cat = [ch["category"] for (_, s), ch in table.items() if s in CATEGORY_SLOTS and ch["category"] is not None]
    out = {"M10": q * sum(ch["satisfied"] for ch in table.values()) / len(table) if table else None,
           "M10b": q * sum(cat) / len(cat) if cat else None,
           "M11": sum(r == 1.0 for r in rates.values()) / len(rates) if rates else None,
           **welfare(rates), **counts, **quality,
           "house_rule_violations": sum(ch.get("house_rules") is False for ch in table.values())}
    return {"metrics": out, "table": table, "rates": rates, "lived": lived}
