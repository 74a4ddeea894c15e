"""Reading a group-planning dialogue and plan as plain data (the metric definitions' CSV sources).

A dialogue is a list of turns ``{"speaker", "intent", "utterance", "meta"}``; a plan is the
TripCraft-style itinerary ``{"days": [...], "raw_output": str, ...}``. These helpers extract what
the metrics need: the slot of an intent, the stated preferences, the places a plan names (per
slot), the text a plan gives a slot and the POI time windows.
"""

from __future__ import annotations

import re

SLOTS = ("traveler_type", "travel_purpose", "spending_preference", "cuisine", "attraction",
         "event", "lodging")
ACTIONABLE_SLOTS = ("lodging", "cuisine", "event", "attraction")
INTENT_PREFIXES = ("user_provide_", "sys_synthesize_", "user_respond_", "sys_request_vote_",
                   "user_vote_", "user_feedback_", "sys_feedback_")
# lodging's two sub-slots count as lodging (reference ambiguity 5)
_SLOT_ALIASES = {"room_type": "lodging", "house_rule": "lodging", "lodging_room_type": "lodging",
                 "lodging_house_rule": "lodging"}
SLOT_KINDS = {"cuisine": ("restaurants",), "attraction": ("attractions",), "event": ("events",),
              "lodging": ("accommodations",)}
_MEALS = ("breakfast", "lunch", "dinner")
_TIME = re.compile(r"from\s+(\d{1,2}):(\d{2})\s+to\s+(\d{1,2}):(\d{2})")


def intent_slot(intent: str) -> str | None:
    """The slot an intent is about (``user_provide_room_type`` -> ``lodging``), else None."""
    for prefix in INTENT_PREFIXES:
        if intent.startswith(prefix):
            slot = intent[len(prefix):]
            return _SLOT_ALIASES.get(slot, slot)
    return None


def stated_preferences(turns: list[dict]) -> dict[tuple[str, str], str]:
    """``{(speaker, slot): text}`` from ``user_provide_*`` turns (a speaker's turns joined)."""
    out: dict[tuple[str, str], str] = {}
    for t in turns:
        if t["intent"].startswith("user_provide_"):
            key = (t["speaker"], intent_slot(t["intent"]))
            out[key] = f"{out[key]} {t['utterance']}" if key in out else t["utterance"]
    return out


def _split_places(value) -> list[str]:
    names = []
    for part in str(value or "").split(";"):
        part = part.strip()
        if part and part != "-":
            names.append(part.rsplit(",", 1)[0].strip() if "," in part else part)
    return names


def plan_places_by_field(plan: dict) -> dict[str, list[str]]:
    """Place names per plan field: breakfast/lunch/dinner/accommodation/attraction/event/poi/branches."""
    out: dict[str, list[str]] = {k: [] for k in (*_MEALS, "accommodation", "attraction", "event",
                                                  "poi", "branch")}
    for day in plan.get("days") or []:
        if not isinstance(day, dict):
            continue
        for key in (*_MEALS, "accommodation", "attraction", "event"):
            out[key] += _split_places(day.get(key))
        poi = day.get("point_of_interest_list", day.get("poi_list")) or ""
        if isinstance(poi, list):
            poi = ";".join(map(str, poi))
        out["poi"] += [p.split(",", 1)[0].strip() for p in str(poi).split(";") if p.strip()]
        for g in day.get("subgroups") or []:
            for branch in ("group_a", "group_b"):
                out["branch"] += _split_places((g.get(branch) or {}).get("place"))
    for b in plan.get("accommodation_branches") or []:
        out["accommodation"] += _split_places(b.get("accommodation"))
    return out


def plan_place_names(plan: dict) -> list[str]:
    """Every place name the plan names, in order, with repeats."""
    return [n for names in plan_places_by_field(plan).values() for n in names]


def plan_slot_places(plan: dict, db, slot: str) -> list[tuple[str, dict]]:
    """``(kind, record)`` of the distinct db places the plan uses for an actionable slot."""
    seen, out = set(), []
    for name in plan_place_names(plan):
        hit = db.lookup(name)
        if hit and hit[0] in SLOT_KINDS.get(slot, ()) and hit[1]["name"] not in seen:
            seen.add(hit[1]["name"])
            out.append(hit)
    return out


def plan_slot_text(plan: dict, slot: str) -> str:
    """The plan's own text for a slot (``_plan_slot_text``): e.g. every meal for cuisine."""
    fields = plan_places_by_field(plan)
    keys = {"cuisine": _MEALS, "attraction": ("attraction",), "event": ("event",),
            "lodging": ("accommodation",)}.get(slot, ())
    return "; ".join(n for k in keys for n in fields[k])


def poi_parts(day: dict) -> list[str]:
    """A day's point-of-interest entries: its ``point_of_interest_list`` (or ``poi_list``), a
    ";"-separated string or a list."""
    poi = day.get("point_of_interest_list", day.get("poi_list")) or ""
    if isinstance(poi, list):
        poi = ";".join(map(str, poi))
    return str(poi).split(";")


def poi_windows(day: dict) -> list[tuple[int, int]]:
    """(start, end) minutes of each POI entry of a day that has a "from HH:MM to HH:MM" window."""
    out = []
    for part in poi_parts(day):
        m = _TIME.search(part)
        if m:
            h1, m1, h2, m2 = map(int, m.groups())
            out.append((h1 * 60 + m1, h2 * 60 + m2))
    return out


# ---------------------------------------------------------------- the spec's literal plan keys
SPEC_DAY_KEYS = ("meals", "accommodations", "attractions", "events", "poi_list")
_PROJECT_DAY_KEYS = (*_MEALS, "accommodation", "attraction", "event", "point_of_interest_list")


def _place(item) -> str:
    """"Name, City" from a string or a record-like dict ({"name", "city"} in any case)."""
    if isinstance(item, dict):
        low = {str(k).lower(): v for k, v in item.items()}
        name = low.get("name") or low.get("place") or low.get("poi") or ""
        city = low.get("city") or ""
        return f"{name}, {city}" if name and city else str(name)
    return str(item or "").strip()


def _joined(value) -> str:
    items = value if isinstance(value, list) else [value]
    names = [_place(i) for i in items if _place(i) not in ("", "-")]
    return "".join(f"{n};" for n in names) if names else "-"


def _poi(value) -> str:
    if not isinstance(value, list):
        return str(value or "")
    out = []
    for item in value:
        if isinstance(item, dict):
            low = {str(k).lower(): v for k, v in item.items()}
            start, end = low.get("start") or low.get("from"), low.get("end") or low.get("to")
            name = low.get("name") or low.get("poi") or ""
            out.append(f"{name}, visit from {start} to {end}" if start and end else str(name))
        else:
            out.append(str(item))
    return ";".join(out)


def normalize_plan(plan) -> tuple[dict | None, list[str]]:
    """A plan in the spec's literal keys (days -> meals, accommodations, attractions, events,
    poi_list) or the project's (breakfast/lunch/dinner, accommodation, attraction, event,
    point_of_interest_list) -> the project's day schema, plus notes on what was missing or
    assumed (one phrase each). A list at the top is the list of days; so is ``itinerary``."""
    notes: list[str] = []
    if plan is None:
        return None, ["no plan"]
    if isinstance(plan, list):
        plan, _ = {"days": plan}, notes.append("plan is a list: read as its days")
    days = plan.get("days", plan.get("itinerary"))
    if not isinstance(days, list):
        return plan, notes + ["plan has no list of days"]
    out_days, missing = [], set()
    for i, day in enumerate(days):
        if not isinstance(day, dict):
            continue
        if any(k in day for k in _PROJECT_DAY_KEYS) and not any(k in day for k in SPEC_DAY_KEYS):
            out_days.append(day)
            continue
        d = {k: v for k, v in day.items() if k not in SPEC_DAY_KEYS}
        d.setdefault("days", day.get("day", i + 1))
        meals = day.get("meals")
        if isinstance(meals, dict):
            for k in _MEALS:
                d[k] = _place(meals.get(k)) or "-"
        elif isinstance(meals, list):
            notes.append("meals given as a list: read in the order breakfast, lunch, dinner")
            for k, v in zip(_MEALS, meals + ["-"] * 3):
                d[k] = _place(v) or "-"
        else:
            missing.add("meals")
        for spec_key, key in (("accommodations", "accommodation"), ("attractions", "attraction"),
                              ("events", "event")):
            if spec_key in day:
                d[key] = _joined(day[spec_key]).rstrip(";") if key != "attraction" else _joined(day[spec_key])
            else:
                missing.add(spec_key)
        if "poi_list" in day:
            d["point_of_interest_list"] = _poi(day["poi_list"])
        else:
            missing.add("poi_list")
        out_days.append(d)
    if missing:
        notes.append(f"plan days lack {', '.join(sorted(missing))} (taken as empty)")
    return {**{k: v for k, v in plan.items() if k not in ("days", "itinerary")}, "days": out_days}, notes
