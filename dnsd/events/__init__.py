"""Events that explain themselves: one record (`Event`), one journal (`EventLog`:
memory, `STATE_DIR/events.jsonl`, listeners such as webhooks and metrics). The
comparison of active pools that turns health, override and config changes into
`failover` / `failback` events is dnsd.admin.active_pool_watch."""

from dnsd.events.journal import EventLog, events_for
from dnsd.events.record import KINDS, Event, acting_as, current_actor, iso_z, parse_iso

__all__ = [
    "KINDS",
    "Event",
    "EventLog",
    "acting_as",
    "current_actor",
    "events_for",
    "iso_z",
    "parse_iso",
]
