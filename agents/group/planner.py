"""The itinerary planner: slot decisions -> a multi-day TripCraft-style plan grounded in the db.

The plan is ``{"city", "start_date", "days": [...], "accommodation_branches": [...], "raw_output"}``;
each day has ``breakfast``, ``lunch``, ``dinner``, ``attraction`` ("Name, City;Name, City;"),
``event``, ``accommodation`` (each "Name, City" or "-"), ``point_of_interest_list`` in TripCraft's
grammar ("<POI>, stay|visit from HH:MM to HH:MM;...") and ``subgroups`` (Shared Backbone /
Group A / Group B / Rejoin for a slot split into subgroups; meals and lodging stay shared).
Every place comes from the database. Options of a decision are used in order: the primary one
first, then coverage / alternation options on later meals and days.
"""

from __future__ import annotations

import datetime as dt

from convsim.catalog.travel import TravelDB

HOUSE_RULE_CHECKS = {   # requirement id -> predicate on the accommodation's house_rules string
    "no_smoking": lambda rules: "No smoking" in rules,
    "pets_allowed": lambda rules: "No pets" not in rules,
    "children_allowed": lambda rules: "No children under 10" not in rules,
    "quiet": lambda rules: "No parties" in rules,
    "visitors_allowed": lambda rules: "No visitors" not in rules,
}
_BREAKFAST_CUISINES = ("Cafe", "Desserts")


def _at(rec: dict) -> str:
    return f"{rec['name']}, {TravelDB.city_of(rec)}"


def _rank_stays(stays: list[dict], spending: str | None) -> list[dict]:
    if spending == "Economical Traveler":
        return sorted(stays, key=lambda r: (r["pricing"], -r["rating"], r["name"]))
    if spending == "Luxury Traveler":
        return sorted(stays, key=lambda r: (-r["rating"], -r["pricing"], r["name"]))
    return sorted(stays, key=lambda r: (-r["rating"], r["pricing"], r["name"]))


def choose_accommodation(db: TravelDB, city: str, room_type: str, rules: list[str], n_people: int,
                         spending: str | None) -> dict | None:
    """Best stay of ``room_type`` meeting the most house-rule requirements (dropped from the end)."""
    stays = [r for r in db.in_city("accommodations", city) if r["roomType"] == room_type]
    stays = [r for r in stays if r["roomType"] != "entire_room" or r["max_occupancy"] >= n_people] or stays
    for keep in range(len(rules), -1, -1):
        ok = [r for r in stays if all(HOUSE_RULE_CHECKS[q](r["house_rules"]) for q in rules[:keep])]
        if ok:
            return _rank_stays(ok, spending)[0]
    return None


class _Picker:
    """Hands out unused places of a kind matching a category, best rated first."""

    def __init__(self, db: TravelDB, city: str, kind: str):
        self.kind, self.used = kind, set()
        self.rows = sorted(db.in_city(kind, city), key=lambda r: (-r.get("rating", 0), r["name"]))

    def pick(self, category: str | None, *, primary_only: bool = False, avoid: set[str] = frozenset(),
             fresh_only: bool = False):
        def cats(r):
            c = TravelDB.categories(self.kind, r)
            return c[:1] if primary_only else c
        for pool in ([r for r in self.rows if category is None or category in cats(r)],
                     [r for r in self.rows if category is None or category in TravelDB.categories(self.kind, r)]):
            for fresh in ((True,) if fresh_only else (True, False)):
                for r in pool:
                    if r["name"] in avoid or (fresh and r["name"] in self.used):
                        continue
                    self.used.add(r["name"])
                    return r
        return None


def _branch(slot: str, decision: dict, day_places: dict[str, dict], backbone: str, rejoin: str) -> dict:
    groups = decision["subgroup_assignment"]["groups"]
    (oa, ma), (ob, mb) = list(groups.items())[:2]
    return {"slot": slot, "shared_backbone": backbone,
            "group_a": {"members": ma, "option": oa, "place": _at(day_places[oa]) if day_places.get(oa) else "-"},
            "group_b": {"members": mb, "option": ob, "place": _at(day_places[ob]) if day_places.get(ob) else "-"},
            "rejoin": rejoin}


def _fresh_meal(rest: _Picker, cuisines: list[str], avoid: set[str]):
    for c in cuisines:
        if c and (r := rest.pick(c, primary_only=True, avoid=avoid, fresh_only=True)):
            return r
    return rest.pick(None, avoid=avoid, fresh_only=True) or rest.pick(cuisines[0], primary_only=True, avoid=avoid) \
        or rest.pick(None, avoid=avoid)


def _fmt(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def build_plan(db: TravelDB, *, city: str, start_date: str, n_days: int, members: list[str],
               decisions: dict[str, dict]) -> dict:
    """The rule-based plan. ``decisions[slot][sub_slot]`` = a synthesis decision (``selected`` list)."""
    def sel(slot, sub=None):
        d = decisions.get(slot, {}).get(sub or slot)
        return d if d else {"selected": [None], "primary": None}
    start = dt.datetime.strptime(start_date, "%d-%m-%Y")
    spending = sel("spending_preference")["primary"]
    room, rules = sel("lodging", "room_type"), sel("lodging", "house_rule")["selected"]
    rules = [r for r in rules if r in HOUSE_RULE_CHECKS]
    n = len(members)
    stays = [choose_accommodation(db, city, rt, rules, n, spending) for rt in room["selected"] if rt]
    stays = [s for s in stays if s] or [None]
    branches = []
    if room.get("operator") == "individual_choice" and len(stays) > 1:
        # each member books the room type they asked for; the first stay is the shared base
        stated = room.get("member_options", {})
        branches = [{"room_type": s["roomType"], "accommodation": _at(s),
                     "members": sorted(m for m, o in stated.items() if o == s["roomType"])} for s in stays[1:]]
        stays = stays[:1]
    rest, attr, evt = (_Picker(db, city, k) for k in ("restaurants", "attractions", "events"))
    cuisine, attraction, event = sel("cuisine"), sel("attraction"), sel("event")
    days, lines = [], []
    for i in range(n_days):
        date = (start + dt.timedelta(days=i)).strftime("%d-%m-%Y")
        stay = stays[-1] if (i == n_days - 1 and len(stays) > 1) else stays[0]
        c_opts = cuisine["selected"]
        lunch_c = c_opts[(2 * i) % len(c_opts)] if not cuisine.get("subgroup_assignment") else c_opts[0]
        dinner_c = c_opts[(2 * i + 1) % len(c_opts)] if len(c_opts) > 1 else c_opts[0]
        breakfast = next((r for c in _BREAKFAST_CUISINES if (r := rest.pick(c))), None) or rest.pick(None)
        # a restaurant not yet on the plan beats a repeat: the wanted cuisine, then any decided
        # cuisine, then anything fresh; a repeat only when the city has nothing new
        lunch = _fresh_meal(rest, [lunch_c] + c_opts, set())
        dinner = _fresh_meal(rest, [dinner_c] + c_opts, {lunch["name"]} if lunch else set())
        subgroups = []
        if cuisine.get("subgroup_assignment"):
            ob = cuisine["subgroup_assignment"]["options"][1]
            places = {c_opts[0]: lunch, ob: rest.pick(ob, primary_only=True)}
            subgroups.append(_branch("cuisine", cuisine, places, "breakfast together",
                                     f"dinner together at {_at(dinner)}" if dinner else "dinner together"))
        a_opts = attraction["selected"]
        if attraction.get("alternate"):
            day_cats = [a_opts[i % len(a_opts)]] * 2
        else:
            day_cats = [a_opts[(2 * i) % len(a_opts)], a_opts[(2 * i + 1) % len(a_opts)]]
        sights = []
        for c in day_cats:   # never the same attraction twice in a day
            s_ = attr.pick(c, avoid={x["name"] for x in sights}) or attr.pick(None, avoid={x["name"] for x in sights})
            sights += [s_] if s_ else []
        if attraction.get("subgroup_assignment"):
            oa, ob = attraction["subgroup_assignment"]["options"]
            taken = {x["name"] for x in sights[:1]}
            places = {oa: sights[1] if len(sights) > 1 else None}
            if not (places[oa] and oa in TravelDB.categories("attractions", places[oa])):
                places[oa] = attr.pick(oa, avoid=taken)
            taken |= {places[oa]["name"]} if places[oa] else set()
            places[ob] = attr.pick(ob, avoid=taken)
            sights = sights[:1] + [p for p in (places[oa], places[ob]) if p]
            subgroups.append(_branch("attraction", attraction, places, f"morning together at {_at(sights[0])}",
                                     "rejoin for dinner"))
        e_opts = event["selected"]
        todays = [e for e in db.events_between(city, date, date) if e["name"] not in evt.used]
        show = next((e for o in e_opts[i % len(e_opts):] + e_opts for e in todays if e["segmentName"] == o), None)
        if show:
            evt.used.add(show["name"])
        if event.get("subgroup_assignment") or event.get("subgrouping_optional"):
            oa, ob = event["subgroup_assignment"]["options"]
            other = next((e for e in todays if e["segmentName"] == ob and e is not show), None)
            if other:
                evt.used.add(other["name"])
                subgroups.append(_branch("event", event, {oa: show, ob: other}, "day programme together",
                                         "meet back at the accommodation"))
        poi, t = [], 8 * 60
        if stay:
            poi.append(f"{stay['name']}, stay from 07:00 to 08:30")
        for s in sights:
            dur = int(60 * float(s.get("visit_duration", 2.0)))
            t = max(t + 30, 9 * 60) if not poi or t < 9 * 60 else t + 30
            poi.append(f"{s['name']}, visit from {_fmt(t)} to {_fmt(t + dur)}")
            t += dur
        if show:
            poi.append(f"{show['name']}, visit from {_fmt(max(t + 60, 19 * 60))} to {_fmt(max(t + 60, 19 * 60) + 120)}")
        day = {"days": i + 1, "date": date, "current_city": city,
               "breakfast": _at(breakfast) if breakfast else "-", "lunch": _at(lunch) if lunch else "-",
               "dinner": _at(dinner) if dinner else "-",
               "attraction": "".join(f"{_at(s)};" for s in sights) or "-",
               "event": _at(show) if show else "-", "accommodation": _at(stay) if stay else "-",
               "point_of_interest_list": ";".join(poi), "subgroups": subgroups}
        days.append(day)
        lines.append(_describe_day(day, db))
    for b in branches:
        lines.append(f"{', '.join(b['members'])} book {b['room_type'].replace('_', ' ')} at {b['accommodation']}.")
    return {"city": city, "start_date": start_date, "people": n, "days": days,
            "accommodation_branches": branches, "raw_output": "\n".join(lines)}


def _describe_day(day: dict, db: TravelDB) -> str:
    def named(value):
        out = []
        for part in [p for p in str(value).split(";") if p.strip() and p.strip() != "-"]:
            name = part.rsplit(",", 1)[0].strip()
            hit = db.lookup(name)
            out.append(f"{name} ({', '.join(TravelDB.categories(*hit))})" if hit else name)
        return ", ".join(out) or "nothing planned"
    text = (f"Day {day['days']} in {day['current_city']}: breakfast at {named(day['breakfast'])}; "
            f"sights: {named(day['attraction'])}; lunch at {named(day['lunch'])}; dinner at "
            f"{named(day['dinner'])}; event: {named(day['event'])}; staying at {named(day['accommodation'])}.")
    for g in day["subgroups"]:
        text += (f" Split for {g['slot']}: {', '.join(g['group_a']['members'])} at {g['group_a']['place']}, "
                 f"{', '.join(g['group_b']['members'])} at {g['group_b']['place']}; {g['rejoin']}.")
    return text
