"""What a plan depended on: the client fields it read, and how long it holds.

A plan (`select.build_plan`) is a pure function of config, health, the clock and the client
fields it reads. It reads the client through `SeenClient`, which notes every field in the
order first read, so the plan carries its own key: two clients with the same values in
those fields would take the same path through the planning code and get the same plan
(gdnsd's habit: the decision returns what it depended on, `gdnsd_sttl_t`). A cache keys
plans by `PlanKey` alone and needs no knowledge of what steering reads; a new input read
through the client is keyed without anyone listing it.

Validity is the plan's too: `LbPlan.until` (a ramp's step ends, the first RTT sample it
could use ages out) and `LbPlan.per_view` (it read RTT or load data, which every new
health view may change).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import Any

from dnsd.geo.locate import Location
from dnsd.steering.client import ClientInfo

# The fields a plan can read, each an attribute path of the located client.
FIELDS: dict[str, str] = {
    "region": "location.region",
    "country": "location.country",
    "subdivision": "location.subdivision",
    "latitude": "location.latitude",
    "longitude": "location.longitude",
    "prefix_len": "location.prefix_len",
    "zone": "zone",
    "zone_prefix": "zone_prefix",
    "pop": "pop",
    "max_prefix": "max_prefix",
    "version": "version",
    "subnet": "subnet",
}

Fields = tuple[str, ...]
# (load balancer, steered type, the fields read in order, their values)
PlanKey = tuple[str, int, Fields, tuple[Any, ...]]


@cache
def _reader(fields: Fields) -> Callable[[ClientInfo], tuple[Any, ...]]:
    """The values of `fields` of a client, read in one call (a cache looks a key up per
    new client)."""
    if not fields:
        return lambda _client: ()
    get = attrgetter(*(FIELDS[f] for f in fields))
    return get if len(fields) > 1 else lambda client: (get(client),)


def key_for(lb: str, qtype: int, fields: Fields, client: ClientInfo) -> PlanKey:
    """The key a plan that read `fields` would have for `client`."""
    return lb, qtype, fields, _reader(fields)(client)


class SeenLocation:
    """The client's location as a plan reads it; `placed` ones (client_region: pop) are
    the node's, not the client's, and note nothing."""

    __slots__ = ("_location", "_seen")

    def __init__(self, location: Location, seen: dict[str, Any] | None) -> None:
        self._location, self._seen = location, seen

    def _read(self, name: str, value: Any) -> Any:
        if self._seen is not None and name not in self._seen:
            self._seen[name] = value
        return value

    @property
    def region(self) -> str | None:
        return self._read("region", self._location.region)

    @property
    def country(self) -> str | None:
        return self._read("country", self._location.country)

    @property
    def subdivision(self) -> str | None:
        return self._read("subdivision", self._location.subdivision)

    @property
    def latitude(self) -> float | None:
        return self._read("latitude", self._location.latitude)

    @property
    def longitude(self) -> float | None:
        return self._read("longitude", self._location.longitude)

    @property
    def prefix_len(self) -> int | None:
        return self._read("prefix_len", self._location.prefix_len)


class SeenClient:
    """The client as a plan reads it (the same fields as `ClientInfo`): `seen` holds each
    field read, in the order first read, with its value."""

    __slots__ = ("_info", "location", "seen")

    def __init__(self, info: ClientInfo, location: SeenLocation | None = None) -> None:
        self._info = info
        self.seen: dict[str, Any] = {}
        self.location = location or SeenLocation(info.location, self.seen)

    def _read(self, name: str, value: Any) -> Any:
        if name not in self.seen:
            self.seen[name] = value
        return value

    @property
    def zone(self) -> str | None:
        return self._read("zone", self._info.zone)

    @property
    def zone_prefix(self) -> int | None:
        return self._read("zone_prefix", self._info.zone_prefix)

    @property
    def pop(self) -> str | None:
        return self._read("pop", self._info.pop)

    @property
    def max_prefix(self) -> int:
        return self._read("max_prefix", self._info.max_prefix)

    @property
    def version(self) -> int:
        return self._read("version", self._info.version)

    def subnet_key(self) -> bytes:
        return self._read("subnet", self._info.subnet)

    def placed(self, location: Location) -> SeenClient:
        """The same client placed at `location` (the node's region): its location fields
        are not the client's, so reading them notes nothing."""
        placed = SeenClient(self._info, SeenLocation(location, None))
        placed.seen = self.seen
        return placed

    def key(self, lb: str, qtype: int) -> PlanKey:
        return lb, qtype, tuple(self.seen), tuple(self.seen.values())
