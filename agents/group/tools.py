"""The group-planning world as LangChain tools: query the travel database (catalog/travel.py).

``TravelTools(db)``: ``find_places(kind, city, category, max_price, min_rating)`` — restaurants,
attractions, accommodations or events of a city, filtered by a category label (cuisine,
subcategory, room type, segment; case-insensitive substring), a price ceiling (``avg_cost`` or
``pricing``) and a minimum rating, the first 15; ``lookup_place(name)`` — one place by name.
Calls and results go to ``calls``. The members' hidden preferences are never reachable from here.
"""
from __future__ import annotations

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from convsim.agents.toollog import ToolLog
from convsim.catalog.travel import KINDS, TravelDB

MAX_RESULTS = 15
PRICE = {"restaurants": "avg_cost", "accommodations": "pricing"}


class FindArgs(BaseModel):
    kind: str = Field(description=f"one of {', '.join(KINDS)}")
    city: str = Field(description="the city")
    category: str | None = Field(None, description="a cuisine, attraction subcategory, room type or event segment")
    max_price: float | None = Field(None, description="restaurants: average cost; accommodations: price per night")
    min_rating: float | None = Field(None, description="the lowest rating wanted")


class LookupArgs(BaseModel):
    name: str = Field(description="a place's name")


TOOL_NAMES = ("find_places", "lookup_place")  # TravelTools.tools(), in order (the slot declares them)


class TravelTools(ToolLog):
    def __init__(self, db: TravelDB) -> None:
        super().__init__()
        self.db = db

    def find_places(self, kind: str, city: str, category: str | None = None, max_price: float | None = None,
                    min_rating: float | None = None) -> dict:
        args = {"kind": kind, "city": city, "category": category, "max_price": max_price, "min_rating": min_rating}
        if kind not in KINDS:
            return self.record("find_places", args, {"ok": False, "reason": "unknown_kind", "kinds": list(KINDS)})
        if city not in self.db.cities():
            return self.record("find_places", args, {"ok": False, "reason": "unknown_city",
                                                     "cities": self.db.cities()})
        out = []
        for r in self.db.in_city(kind, city):
            if category and not any(category.lower() in c.lower() for c in self.db.categories(kind, r)):
                continue
            price = r.get(PRICE.get(kind, ""), None)
            if max_price is not None and isinstance(price, (int, float)) and price > max_price:
                continue
            if min_rating is not None and isinstance(r.get("rating"), (int, float)) and r["rating"] < min_rating:
                continue
            out.append(dict(r))
        return self.record("find_places", args, {"ok": True, "count": len(out), "results": out[:MAX_RESULTS]})

    def lookup_place(self, name: str) -> dict:
        hit = self.db.lookup(name)
        result = {"ok": True, "kind": hit[0], "place": dict(hit[1])} if hit else {"ok": False, "reason": "not_found"}
        return self.record("lookup_place", {"name": name}, result)

    def tools(self) -> list[StructuredTool]:
        def find_places(kind: str, city: str, category: str | None = None, max_price: float | None = None,
                        min_rating: float | None = None) -> dict:
            return self.find_places(kind, city, category, max_price, min_rating)

        def lookup_place(name: str) -> dict:
            return self.lookup_place(name)

        return [StructuredTool.from_function(find_places, name="find_places", args_schema=FindArgs,
                                             description="Find restaurants, attractions, accommodations or events "
                                                         "in a city, by category, price and rating."),
                StructuredTool.from_function(lookup_place, name="lookup_place", args_schema=LookupArgs,
                                             description="Look up one place of the travel database by name.")]
