"""Seeded generator of the project's synthetic travel reference database (TripCraft-like schema).

TripCraft's data may not be redistributed, so the project ships a small database written for it:
three fictional cities, each with accommodations, restaurants, attractions and events in the
TripCraft field names (``roomType`` entire_room/private_room/shared_room, ``house_rules``,
``pricing``, ``max_occupancy``, ``rating``; ``cuisines``, ``avg_cost``; ``subcategories``;
``dateTitle`` dd-mm-YYYY and ``segmentName``). Every cuisine, attraction subcategory and event
segment of the vocabulary appears in every city, so every stated preference can be grounded.

Run ``python catalog/data/travel/generate.py`` to rewrite the JSON files next to this script;
the output is identical for the same seed (stdlib ``random.Random`` with a fixed seed).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 2025
CITIES = ("Riverton", "Lakeside", "Harborview")
CUISINES = ("Italian", "Chinese", "Mexican", "Indian", "American", "Mediterranean", "French",
            "Seafood", "BBQ", "Vegetarian", "Japanese", "Thai", "Cafe", "Desserts", "Fast Food")
ATTRACTION_CATEGORIES = ("Museum", "Park", "Zoo", "Aquarium", "Historic Site", "Theme Park",
                         "Art Gallery", "Hiking Trail", "Beach", "Shopping")
EVENT_SEGMENTS = ("Music", "Sports", "Arts & Theatre", "Film", "Miscellaneous")
ROOM_TYPES = ("entire_room", "private_room", "shared_room")
HOUSE_RULES = ("No pets", "No parties", "No children under 10", "No smoking", "No visitors")
TRIP_START = (2026, 6, 1)   # events are dated within the ten days from this date

_ADJ = ("Golden", "Blue", "Old", "Silver", "Green", "Royal", "Sunny", "Quiet", "Grand", "Little",
        "Maple", "Cedar", "Harbor", "Stone", "Willow", "Amber", "Coral", "North", "River", "Hill")
_FOOD_NOUN = ("Table", "Kitchen", "Bistro", "House", "Corner", "Garden", "Spoon", "Lantern",
              "Oven", "Plate", "Terrace", "Grill")
_STAY_NOUN = ("Loft", "Suites", "Inn", "Retreat", "Apartments", "Lodge", "Hostel", "Residence",
              "Cottage")
_ATTR_NOUN = {"Museum": "Museum", "Park": "Park", "Zoo": "Zoo", "Aquarium": "Aquarium",
              "Historic Site": "Fort", "Theme Park": "Adventure World", "Art Gallery": "Gallery",
              "Hiking Trail": "Trail", "Beach": "Beach", "Shopping": "Market"}
_EVENT_NOUN = {"Music": "Jazz Night", "Sports": "Derby", "Arts & Theatre": "Stage Festival",
               "Film": "Film Week", "Miscellaneous": "Street Fair"}


def _unique_name(rng: random.Random, used: set[str], nouns, city: str, suffix: str = "") -> str:
    while True:
        name = f"{rng.choice(_ADJ)} {rng.choice(nouns)}{suffix}"
        if name not in used:
            used.add(name)
            return name


def generate(seed: int = SEED) -> dict[str, list[dict]]:
    """Return ``{"accommodations": [...], "restaurants": [...], "attractions": [...], "events": [...]}``."""
    rng = random.Random(seed)
    used: set[str] = set()   # place names are unique across cities so M9 can match by name
    db: dict[str, list[dict]] = {"accommodations": [], "restaurants": [], "attractions": [], "events": []}
    for city in CITIES:
        for i in range(9):
            room = ROOM_TYPES[i % 3]
            rules = sorted(rng.sample(HOUSE_RULES, rng.randint(0, 2)))
            db["accommodations"].append({
                "name": _unique_name(rng, used, _STAY_NOUN, city, f" {city}"),
                "pricing": {"entire_room": 180, "private_room": 95, "shared_room": 40}[room]
                + rng.randint(-20, 60),
                "roomType": room, "house_rules": " & ".join(rules),
                "max_occupancy": rng.randint(2, 3) if room != "entire_room" else rng.randint(4, 8),
                "rating": round(rng.uniform(3.2, 5.0), 1), "City": city})
        # two restaurants per cuisine guarantee coverage; each also gets one secondary cuisine
        order = list(CUISINES) * 2
        for cuisine in order:
            other = rng.choice([c for c in CUISINES if c != cuisine])
            db["restaurants"].append({
                "name": _unique_name(rng, used, _FOOD_NOUN, city),
                "avg_cost": rng.randint(12, 80), "cuisines": f"{cuisine}, {other}",
                "rating": round(rng.uniform(3.0, 5.0), 1), "City": city})
        for category in ATTRACTION_CATEGORIES:
            for _ in range(2):
                extra = rng.choice([c for c in ATTRACTION_CATEGORIES if c != category])
                db["attractions"].append({
                    "name": f"{_unique_name(rng, used, [_ATTR_NOUN[category]], city)}",
                    "latitude": round(rng.uniform(30, 45), 4), "longitude": round(rng.uniform(-120, -75), 4),
                    "address": f"{rng.randint(1, 999)} Main St, {city}",
                    "visit_duration": rng.choice((1.5, 2.0, 2.5, 3.0)),
                    "subcategories": f"{category}, {extra}" if rng.random() < 0.3 else category,
                    "website": "", "City": city})
        for segment in EVENT_SEGMENTS:
            # every other day from a random offset: any 2-day window of the ten has each segment
            for day in range(TRIP_START[2] + rng.randint(0, 1), TRIP_START[2] + 10, 2):
                db["events"].append({
                    "name": f"{city} {_unique_name(rng, used, [_EVENT_NOUN[segment]], city)}",
                    "url": "", "dateTitle": f"{day:02d}-{TRIP_START[1]:02d}-{TRIP_START[0]}",
                    "streetAddress": f"{rng.randint(1, 999)} Center Ave, {city}",
                    "segmentName": segment, "city": city})
    return db


def main(out_dir: Path | None = None, seed: int = SEED) -> None:
    out_dir = out_dir or Path(__file__).resolve().parent
    for kind, rows in generate(seed).items():
        (out_dir / f"{kind}.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
