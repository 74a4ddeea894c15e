"""Seeded generator of the project's own Cambridge-like MultiWOZ-schema database.

Run ``python catalog/data/service/generate.py`` (optionally ``--seed N --out DIR``) to write
``restaurant_db.json``, ``hotel_db.json``, ``attraction_db.json``, ``train_db.json`` and
``schema.json`` next to this script. The same seed always writes byte-identical files.

Records follow the field names and value conventions of the MultiWOZ databases
(``arriveBy``/``leaveAt``/``trainID`` in train, ``entrance fee`` in attraction, a ``price``
dict in hotel) so that ``convsim.catalog.service.db.load_service_db`` reads this folder and the real
``../shared/data/multiwoz/db`` with the same code. Every name, address and phone number is
invented for the project; only the ontology (areas, price ranges, stations, types) follows
MultiWOZ so that real dialogues and our simulator speak the same vocabulary.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

AREAS = ["centre", "north", "south", "east", "west"]
PRICERANGES = ["cheap", "moderate", "expensive"]
FOODS = ["british", "italian", "indian", "chinese", "french", "european", "modern european",
         "thai", "japanese", "korean", "turkish", "mediterranean", "spanish", "portuguese",
         "gastropub", "lebanese", "mexican", "vietnamese", "seafood", "north american",
         "asian oriental", "international", "african", "greek"]
# Words that make plausible venue names; combined per domain so names stay distinct.
NAME_HEADS = ["golden", "silver", "old", "river", "market", "garden", "royal", "little", "red",
              "green", "blue", "copper", "willow", "cedar", "granta", "mill", "bridge", "castle",
              "orchard", "meadow", "abbey", "harbour", "lantern", "oak", "rose", "swan", "fen",
              "chapel", "kingfisher", "heron"]
RESTAURANT_TAILS = ["kitchen", "bistro", "grill", "table", "brasserie", "dining room", "canteen",
                    "tavern", "house", "trattoria", "spice house", "noodle bar"]
HOTEL_TAILS = ["hotel", "lodge", "guest house", "house", "inn", "court", "rooms"]
ATTRACTION_TYPES = {
    "museum": ["museum of {x}", "{h} gallery", "{h} collection"],
    "college": ["{h} college", "st {x}'s college"],
    "park": ["{h} park", "{h} gardens", "{h} common"],
    "theatre": ["{h} theatre", "{h} playhouse"],
    "architecture": ["{h} church", "{h} chapel", "old {x} hall"],
    "nightclub": ["club {h}", "the {h} rooms"],
    "swimmingpool": ["{h} swimming pool", "{h} lido"],
    "boat": ["{h} punting co", "{h} boat tours"],
    "cinema": ["{h} cinema", "{h} picture house"],
    "entertainment": ["{h} funky fun house", "{h} adventure centre"],
    "concerthall": ["{h} concert hall"],
    "multiple sports": ["{h} sports centre"],
}
MUSEUM_TOPICS = ["classical art", "technology", "zoology", "archaeology", "folk life", "maps",
                 "music", "science", "printing", "photography", "fenland history", "clocks"]
SAINTS = ["john", "mary", "peter", "edmund", "andrew", "catherine", "giles", "clement"]
STREETS = ["regent street", "mill road", "hills road", "king street", "trumpington street",
           "chesterton road", "newmarket road", "histon road", "huntingdon road", "bridge street",
           "jesus lane", "sidney street", "lensfield road", "cherry hinton road", "milton road",
           "barton road", "madingley road", "coldham lane", "tenison road", "station road",
           "castle street", "magdalene street", "fitzroy street", "burleigh street"]
POSTCODE_DISTRICT = {"centre": ["cb21", "cb23", "cb58"], "north": ["cb41", "cb43", "cb42"],
                     "south": ["cb17", "cb28", "cb22"], "east": ["cb13", "cb58", "cb11"],
                     "west": ["cb30", "cb39", "cb35"]}
STATIONS = ["london kings cross", "london liverpool street", "ely", "peterborough", "norwich",
            "stansted airport", "leicester", "birmingham new street", "broxbourne",
            "bishops stortford", "stevenage", "kings lynn"]
# (minutes of travel, price in pounds) per station to/from cambridge, MultiWOZ-like magnitudes.
STATION_TRIP = {"london kings cross": (51, 23.60), "london liverpool street": (88, 16.60),
                "ely": (17, 4.40), "peterborough": (50, 16.50), "norwich": (79, 17.60),
                "stansted airport": (28, 10.10), "leicester": (105, 37.80),
                "birmingham new street": (163, 75.10), "broxbourne": (60, 17.90),
                "bishops stortford": (38, 10.10), "stevenage": (49, 12.80),
                "kings lynn": (47, 9.80)}
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
LETTERS = "abdefghjlnpqrstuwxyz"


def _postcode(rng: random.Random, area: str) -> str:
    return rng.choice(POSTCODE_DISTRICT[area]) + rng.choice(LETTERS) + rng.choice(LETTERS)


def _phone(rng: random.Random, used: set[str]) -> str:
    while True:
        phone = "01223" + "".join(rng.choice("0123456789") for _ in range(6))
        if phone not in used:
            used.add(phone)
            return phone


def _address(rng: random.Random) -> str:
    return f"{rng.randint(1, 180)} {rng.choice(STREETS)}"


def _location(rng: random.Random) -> list[float]:
    return [round(rng.uniform(52.18, 52.23), 6), round(rng.uniform(0.09, 0.17), 6)]


def _unique_name(rng: random.Random, make, used: set[str]) -> str:
    # Unique across all domains even without a leading "the", so a name picks one venue.
    for _ in range(1000):
        name = make()
        key = name.removeprefix("the ")
        if key not in used:
            used.add(key)
            return name
    raise RuntimeError("ran out of distinct names; widen the word lists")


def restaurants(rng: random.Random, n: int, phones: set[str], names: set[str]) -> list[dict]:
    out = []
    for i in range(n):
        area = AREAS[i % len(AREAS)] if i < 15 else rng.choice(AREAS)
        food = FOODS[i % len(FOODS)] if i < len(FOODS) else rng.choice(FOODS)
        out.append({
            "address": _address(rng), "area": area, "food": food, "id": str(20000 + i),
            "introduction": f"a {food} restaurant in the {area} of town",
            "location": _location(rng),
            "name": _unique_name(rng, lambda: f"the {rng.choice(NAME_HEADS)} "
                                               f"{rng.choice(RESTAURANT_TAILS)}", names),
            "phone": _phone(rng, phones), "postcode": _postcode(rng, area),
            "pricerange": PRICERANGES[i % 3], "type": "restaurant"})
    return out


def hotels(rng: random.Random, n: int, phones: set[str], names: set[str]) -> list[dict]:
    out = []
    base = {"cheap": 45, "moderate": 75, "expensive": 120}
    for i in range(n):
        area = AREAS[i % len(AREAS)]
        pricerange = PRICERANGES[(i // len(AREAS)) % 3]
        tail = rng.choice(HOTEL_TAILS)
        kind = "guesthouse" if tail in ("guest house", "house", "lodge") else "hotel"
        single = base[pricerange] + rng.randint(0, 25)
        out.append({
            "address": _address(rng), "area": area,
            "internet": rng.choice(["yes", "yes", "yes", "no"]),
            "parking": rng.choice(["yes", "yes", "no"]), "id": str(i),
            "location": _location(rng),
            "name": _unique_name(rng, lambda: f"{rng.choice(NAME_HEADS)} {tail}", names),
            "phone": _phone(rng, phones), "postcode": _postcode(rng, area),
            "price": {"single": str(single), "double": str(single + 20 + rng.randint(0, 15)),
                      "family": str(single + 45 + rng.randint(0, 20))},
            "pricerange": pricerange,
            "stars": str(rng.choice([0, 2, 3, 3, 4, 4, 4]) if kind == "guesthouse"
                         else rng.choice([2, 3, 4, 4])),
            "takesbookings": "yes", "type": kind})
    return out


def attractions(rng: random.Random, n: int, phones: set[str], names: set[str]) -> list[dict]:
    out = []
    types = list(ATTRACTION_TYPES)
    for i in range(n):
        kind = types[i % len(types)] if i < len(types) else rng.choice(types[:8])
        area = AREAS[i % len(AREAS)]
        patterns = ATTRACTION_TYPES[kind]
        topic = rng.choice(SAINTS if kind in ("college", "architecture") else MUSEUM_TOPICS)
        name = _unique_name(rng, lambda: rng.choice(patterns).format(
            h=rng.choice(NAME_HEADS), x=topic), names)
        free = kind in ("museum", "college", "park", "architecture") and rng.random() < 0.7
        fee = "free" if free else f"{rng.choice([2, 3, 4, 5, 6])}.{rng.choice(['00', '50'])} pounds"
        out.append({
            "address": _address(rng), "area": area, "entrance fee": fee, "id": str(i + 1),
            "location": _location(rng), "name": name,
            "openhours": f"it opens from {rng.choice([9, 10, 11])}:00 a.m. to "
                         f"{rng.choice([4, 5, 6])}:00 p.m. daily",
            "phone": _phone(rng, phones), "postcode": _postcode(rng, area),
            "pricerange": "free" if free else rng.choice(["cheap", "moderate"]), "type": kind})
    return out


def trains(rng: random.Random, per_route_day: int) -> list[dict]:
    out, used_ids = [], set()
    for station in STATIONS:
        minutes, price = STATION_TRIP[station]
        for departure, destination in ((station, "cambridge"), ("cambridge", station)):
            for day in DAYS:
                offset = rng.randint(0, 59)
                for k in range(per_route_day):
                    leave = 5 * 60 + offset + k * (18 * 60 // per_route_day)
                    arrive = leave + minutes
                    while True:
                        train_id = f"TR{rng.randint(1000, 9999)}"
                        if train_id not in used_ids:
                            used_ids.add(train_id)
                            break
                    fare = price * (0.8 if day in ("saturday", "sunday") else 1.0)
                    out.append({
                        "arriveBy": f"{arrive // 60:02d}:{arrive % 60:02d}", "day": day,
                        "departure": departure, "destination": destination,
                        "duration": f"{minutes} minutes",
                        "leaveAt": f"{leave // 60:02d}:{leave % 60:02d}",
                        "price": f"{fare:.2f} pounds", "trainID": train_id})
    return out


def schema() -> list[dict]:
    """The MultiWOZ 2.2 schema subset for our four domains (same structure as schema.json)."""
    def slot(domain, name, categorical, values=None):
        return {"name": f"{domain}-{name}", "is_categorical": categorical,
                "possible_values": values or []}
    days, people = DAYS, [str(i) for i in range(1, 9)]
    places = sorted(STATIONS + ["cambridge"])
    services = {
        "restaurant": [slot("restaurant", "pricerange", True, PRICERANGES),
                       slot("restaurant", "area", True, AREAS), slot("restaurant", "food", False),
                       slot("restaurant", "name", False),
                       slot("restaurant", "bookday", True, days),
                       slot("restaurant", "bookpeople", True, people),
                       slot("restaurant", "booktime", False)],
        "hotel": [slot("hotel", "pricerange", True, PRICERANGES),
                  slot("hotel", "type", True, ["guesthouse", "hotel"]),
                  slot("hotel", "parking", True, ["free", "no", "yes"]),
                  slot("hotel", "bookday", True, days), slot("hotel", "bookpeople", True, people),
                  slot("hotel", "bookstay", True, people),
                  slot("hotel", "stars", True, ["0", "1", "2", "3", "4", "5"]),
                  slot("hotel", "internet", True, ["free", "no", "yes"]),
                  slot("hotel", "name", False), slot("hotel", "area", True, AREAS)],
        "attraction": [slot("attraction", "area", True, AREAS), slot("attraction", "name", False),
                       slot("attraction", "type", True, sorted(ATTRACTION_TYPES))],
        "train": [slot("train", "arriveby", False), slot("train", "departure", True, places),
                  slot("train", "day", True, days), slot("train", "bookpeople", True, people),
                  slot("train", "leaveat", False), slot("train", "destination", True, places)],
    }
    out = []
    for domain, slots in services.items():
        names = [s["name"] for s in slots]
        intents = [{"name": f"find_{domain}", "is_transactional": False, "required_slots": [],
                    "optional_slots": {n: "dontcare" for n in names}}]
        if domain != "attraction":
            intents.append({"name": f"book_{domain}", "is_transactional": True,
                            "required_slots": [], "optional_slots": {n: "dontcare" for n in names}})
        out.append({"service_name": domain, "slots": slots, "intents": intents})
    return out


def generate(seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    phones: set[str] = set()
    names: set[str] = set()
    return {"restaurant_db.json": restaurants(rng, 72, phones, names),
            "hotel_db.json": hotels(rng, 64, phones, names),
            "attraction_db.json": attractions(rng, 66, phones, names),
            "train_db.json": trains(rng, 4),
            "schema.json": schema()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for filename, content in generate(args.seed).items():
        (args.out / filename).write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out / filename} ({len(content)} records)")


if __name__ == "__main__":
    main()
