"""Simulated group members for group travel planning (reference group_and_retrieval §1b).

A group is a list of members ``{"member_id", "name", "role", "persona", "preferences"}`` where
``preferences[slot] = {"option", "also_ok", "reject", "text"}`` for every slot of ``SLOTS`` (lodging
carries ``room_type`` and ``house_rule`` instead of one option). About half of the members name a
second option they would also accept ("... and Mexican would also be fine"), so an approval count
differs from a plurality count and a synthesis can cover members without giving each their first
choice. Preferences are drawn per session from
role-biased pools with designed conflicts: on the conflict slots of the group type at least two
members want different options, and some members reject another member's option outright
("... but no Seafood"), which is what the vote round's polarity scorer reads.
Draws come from ``rng_for(seed, "members", ...)`` streams so they do not depend on the agent.

``agreement`` (default 0: the groups as they always were) makes some groups agree: each slot that
is not one of the group type's designed conflict slots becomes, with that probability, a *shared*
slot on which every member states the same option (one member's own draw, lodging: the same room
type and house rule). The coin and the member whose wish is shared come from a stream of their own,
``rng_for(seed, "members", group_type, slot, "agreement")``, so the other draws are unchanged and
with ``agreement=0`` the groups are exactly those of before. It exists so that M2's false-alarm
side (``M2_false_alarm``: agreeing slots reported as conflicts) has agreeing slots to be measured
on; rule members almost never agree by chance (docs/group_planning.md).
"""

from __future__ import annotations

from convsim import rng_for

SLOTS = ("traveler_type", "travel_purpose", "spending_preference", "cuisine", "attraction",
         "event", "lodging")
ACTIONABLE_SLOTS = ("lodging", "cuisine", "event", "attraction")
GROUP_TYPES = ("family", "elder_young", "spouses", "colleagues", "strangers")

OPTIONS = {
    "traveler_type": ("Adventure Seeker", "Laidback Traveler", "Cultural Enthusiast",
                      "Urban Explorer", "Nature Lover"),
    "travel_purpose": ("Relaxation", "Cultural Exploration", "Adventure", "Nightlife",
                       "Family Bonding", "Team Building"),
    "spending_preference": ("Luxury Traveler", "Moderate Spender", "Economical Traveler"),
    "cuisine": ("Italian", "Chinese", "Mexican", "Indian", "American", "Mediterranean", "French",
                "Seafood", "BBQ", "Vegetarian", "Japanese", "Thai", "Cafe", "Desserts", "Fast Food"),
    "attraction": ("Museum", "Park", "Zoo", "Aquarium", "Historic Site", "Theme Park",
                   "Art Gallery", "Hiking Trail", "Beach", "Shopping"),
    "event": ("Music", "Sports", "Arts & Theatre", "Film", "Miscellaneous"),
    "room_type": ("entire_room", "private_room", "shared_room"),
    "house_rule": ("no_smoking", "pets_allowed", "children_allowed", "quiet", "visitors_allowed"),
}
ROOM_TYPE_TEXT = {"entire_room": "an entire home", "private_room": "a private room",
                  "shared_room": "a shared room"}
HOUSE_RULE_TEXT = {"no_smoking": "it has to be a no smoking place",
                   "pets_allowed": "pets must be allowed, we bring the dog",
                   "children_allowed": "children under 10 must be allowed",
                   "quiet": "a quiet place where parties are banned",
                   "visitors_allowed": "visitors should be allowed"}
HIGH_STAMINA = {"Sports", "Hiking Trail", "Theme Park"}   # what elder_stamina_hc filters out

# role -> slot -> favoured options (drawn first); anything else comes from OPTIONS
_ROLE_POOLS = {
    "parent": {"cuisine": ("Italian", "Mediterranean", "Vegetarian", "French"),
               "attraction": ("Museum", "Park", "Historic Site"), "event": ("Arts & Theatre", "Music"),
               "room_type": ("entire_room",), "house_rule": ("children_allowed", "no_smoking"),
               "spending_preference": ("Moderate Spender", "Economical Traveler")},
    "child": {"cuisine": ("Fast Food", "American", "Desserts", "Mexican"),
              "attraction": ("Theme Park", "Zoo", "Aquarium", "Beach"), "event": ("Sports", "Film"),
              "room_type": ("entire_room", "private_room"), "house_rule": ("pets_allowed",),
              "spending_preference": ("Luxury Traveler",)},
    "elder": {"cuisine": ("Chinese", "French", "Mediterranean", "Seafood"),
              "attraction": ("Museum", "Historic Site", "Art Gallery", "Park"),
              "event": ("Arts & Theatre", "Music"), "room_type": ("private_room",),
              "house_rule": ("quiet", "no_smoking"), "spending_preference": ("Moderate Spender",)},
    "young": {"cuisine": ("Japanese", "Thai", "BBQ", "Fast Food"),
              "attraction": ("Hiking Trail", "Theme Park", "Beach", "Shopping"),
              "event": ("Sports", "Music", "Film"), "room_type": ("shared_room", "private_room"),
              "house_rule": ("visitors_allowed",), "spending_preference": ("Economical Traveler",)},
    "partner": {"cuisine": ("French", "Italian", "Japanese", "Seafood", "Thai"),
                "attraction": ("Beach", "Art Gallery", "Park", "Shopping"),
                "event": ("Music", "Film", "Arts & Theatre"), "room_type": ("entire_room", "private_room"),
                "house_rule": ("no_smoking", "quiet")},
    "colleague": {"cuisine": ("Indian", "Chinese", "BBQ", "Vegetarian", "American", "Cafe"),
                  "attraction": ("Museum", "Shopping", "Hiking Trail", "Historic Site"),
                  "event": ("Sports", "Music", "Miscellaneous"), "room_type": ("private_room", "shared_room"),
                  "house_rule": ("no_smoking", "visitors_allowed")},
    "stranger": {},
}
_ROSTERS = {
    "family": [("Maria", "parent", "a mother of two who plans carefully and watches the budget"),
               ("David", "parent", "a father who wants a calm, safe trip for the kids"),
               ("Lily", "child", "a 14-year-old who loves thrills and fast food"),
               ("Sam", "child", "a 9-year-old who wants animals and games")],
    "elder_young": [("Grandma Rose", "elder", "a 74-year-old who tires quickly and loves history"),
                    ("Tom", "parent", "a 45-year-old father keeping everyone happy"),
                    ("Jake", "young", "a 19-year-old student after adventure and nightlife")],
    "spouses": [("Anna", "partner", "a designer who loves art and fine dining"),
                ("Ben", "partner", "an engineer who loves the outdoors and live sport")],
    "colleagues": [("Priya", "colleague", "a team lead organising an offsite on a budget"),
                   ("Marcus", "colleague", "a sales manager who likes steak and sport"),
                   ("Chen", "colleague", "a vegetarian developer who likes museums"),
                   ("Olga", "colleague", "an analyst who wants some time alone")],
    "strangers": [("Kofi", "stranger", "a backpacker meeting the group through a tour app"),
                  ("Elena", "stranger", "a retired teacher travelling solo"),
                  ("Hiro", "stranger", "a photographer chasing landscapes"),
                  ("Nadia", "stranger", "a food blogger")],
}
# slots on which the draw guarantees disagreement, per group type
CONFLICT_SLOTS = {
    "family": ("cuisine", "attraction", "event", "lodging"),
    "elder_young": ("cuisine", "attraction", "event", "lodging"),
    "spouses": ("cuisine", "attraction", "event"),
    "colleagues": ("cuisine", "attraction", "lodging", "travel_purpose"),
    "strangers": ("cuisine", "attraction", "event", "traveler_type", "lodging"),
}


def _draw(rng, role: str, slot: str) -> str:
    pool = _ROLE_POOLS.get(role, {}).get(slot) or OPTIONS[slot]
    return rng.choice(pool) if rng.random() < 0.8 else rng.choice(OPTIONS[slot])


def _utterance(slot: str, pref: dict, rng) -> str:
    if slot == "lodging":
        return (f"For lodging I'd prefer {ROOM_TYPE_TEXT[pref['room_type']]}, "
                f"and {HOUSE_RULE_TEXT[pref['house_rule']]}.")
    lead = rng.choice(("I'd really love", "I prefer", "I want", "I'd enjoy"))
    noun = {"traveler_type": "as my travel style", "travel_purpose": "as the purpose of this trip",
            "spending_preference": "for spending", "cuisine": "cuisine", "attraction": "places to visit",
            "event": "events"}[slot]
    text = f"{lead} {pref['option']} {noun}."
    if pref.get("also_ok"):
        text = text[:-1] + f", and {pref['also_ok']} would also be fine."
    if pref.get("reject"):
        text += f" But no {pref['reject']}, please."
    return text


def shared_by_design(group_type: str, seed: int, slot: str, agreement: float, n_members: int) -> int | None:
    """The index of the member whose wish every member shares on ``slot``, or None when the slot
    is drawn as usual. Never on the group type's designed conflict slots; otherwise with
    probability ``agreement``, from the stream ``(seed, "members", group_type, slot, "agreement")``
    (one coin per slot, so the slots shared at a lower ``agreement`` stay shared at a higher one)."""
    if agreement <= 0 or slot in CONFLICT_SLOTS[group_type]:
        return None
    rng = rng_for(seed, "members", group_type, slot, "agreement")
    coin, who = rng.random(), rng.randrange(n_members)
    return who if coin < agreement else None


def make_group(group_type: str, seed: int, agreement: float = 0.0) -> list[dict]:
    """The members of one session's group, with personas and per-slot preferences.

    ``agreement``: the probability that a slot outside the group type's designed conflicts is
    shared (every member states one member's option; ``shared_by_design``). 0 draws every slot
    independently per member, as always."""
    if group_type not in _ROSTERS:
        raise ValueError(f"unknown group type {group_type!r}; expected one of {GROUP_TYPES}")
    if not 0.0 <= agreement <= 1.0:
        raise ValueError(f"agreement must be in [0, 1], got {agreement!r}")
    members = [{"member_id": f"m{i}", "name": n, "role": r, "persona": p, "preferences": {}}
               for i, (n, r, p) in enumerate(_ROSTERS[group_type])]
    for slot in SLOTS:
        rng = rng_for(seed, "members", group_type, slot)
        shared = shared_by_design(group_type, seed, slot, agreement, len(members))
        keys = ("room_type", "house_rule") if slot == "lodging" else ("option",)
        for key in keys:
            opt_slot = slot if key == "option" else key
            values = [_draw(rng, m["role"], opt_slot) for m in members]
            if shared is not None:
                # a shared slot: everyone states that member's option (the draws above still run,
                # so the rest of the slot's stream is consumed as without agreement)
                values = [values[shared]] * len(values)
            elif slot in CONFLICT_SLOTS[group_type] and len(set(values)) == 1:
                # designed conflict: the last member wants something else
                values[-1] = rng.choice([o for o in OPTIONS[opt_slot] if o != values[0]])
            for m, v in zip(members, values):
                m["preferences"].setdefault(slot, {})[key] = v
        if slot in ("cuisine", "attraction", "event"):
            # about half the members would also accept a second option from their own pool
            for m in members:
                own = m["preferences"][slot]["option"]
                pool = [o for o in (_ROLE_POOLS.get(m["role"], {}).get(slot) or OPTIONS[slot]) if o != own]
                m["preferences"][slot]["also_ok"] = rng.choice(pool) if pool and rng.random() < 0.5 else None
            # one member rejects another member's wish outright (a negation for the vote scorer)
            opts = [m["preferences"][slot]["option"] for m in members]
            for m in members:
                others = [o for o in opts if o != m["preferences"][slot]["option"]]
                others = [o for o in others if o != m["preferences"][slot].get("also_ok")]
                if others and rng.random() < 0.35:
                    m["preferences"][slot]["reject"] = rng.choice(others)
        for m in members:
            m["preferences"][slot].setdefault("reject", None)
            m["preferences"][slot].setdefault("also_ok", None)
            m["preferences"][slot]["text"] = _utterance(slot, m["preferences"][slot], rng)
    return members


def member_option(pref: dict, slot: str) -> str:
    """The one option a member stated for a slot (lodging: the room type)."""
    return pref["room_type"] if slot == "lodging" else pref["option"]


def speak_preference(member: dict, slot: str, *, spokesperson_for: int | None = None) -> dict:
    """A member's ``user_provide_<slot>`` turn (text + meta with the stated option)."""
    pref = member["preferences"][slot]
    text = pref["text"]
    if spokesperson_for:
        text = f"Speaking for our group of {spokesperson_for}: {text}"
    return {"speaker": member["name"], "text": text,
            "meta": {"intent": f"user_provide_{slot}", "slot": slot, "member_id": member["member_id"],
                     "preference_option": member_option(pref, slot),
                     "preference_reject": pref.get("reject"), "preference_also_ok": pref.get("also_ok"),
                     **({"house_rule": pref["house_rule"]} if slot == "lodging" else {})}}
