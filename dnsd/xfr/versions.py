"""Each zone's served serial and its journal of recent versions (for IXFR), kept by the
main process and persisted in the state directory (`serials.json`), so serials stay
monotonic across restarts.

`update(snapshot, view, now)` is called with every snapshot about to be published and every
health view: it recomputes what each zone transfers (dnsd.xfr.content), numbers a changed
zone with the next serial (dnsd.xfr.serials) and returns the snapshot serving those
serials. Listeners hear of every new serial (NOTIFY).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from dnsd.atomic_files import write_file
from dnsd.health.view import HealthView
from dnsd.reaper import release_later
from dnsd.snapshot import Snapshot, with_serials
from dnsd.xfr.content import ZoneContent, content_of, signing_marker
from dnsd.xfr.lb_answers import LbAnswers
from dnsd.xfr.serials import MASK, next_serial

log = logging.getLogger("dnsd.xfr")
STATE_FILE: Final = "serials.json"
JOURNAL_VERSIONS: Final = 16  # versions kept per zone for IXFR; older serials get AXFR
JOURNAL_RECORDS: Final = 200_000  # records kept per zone across its journal
MAX_STATE_BYTES: Final = 16 << 20


@dataclass(frozen=True, slots=True)
class Served:
    serial: int
    digest: str


class ZoneVersions:
    def __init__(self, state_dir: Path | None, persist: bool = True) -> None:
        self._path = state_dir / STATE_FILE if state_dir else None
        self._persist = persist  # `dnsd export` reads the state but never writes it
        self._served: dict[str, Served] = self._load()
        self._journal: dict[str, deque[ZoneContent]] = {}
        # zone → (its Zone config, its signing marker) the last content was made from
        self._inputs: dict[str, tuple[object, str, object]] = {}
        self.listeners: list[Callable[[str, int], None]] = []
        self._writer: ThreadPoolExecutor | None = None

    def update(self, snap: Snapshot, view: HealthView, now: float) -> Snapshot:
        """O(zones + changed names) per health view: a zone whose configuration and signing
        state are unchanged recomputes only the load-balanced names the view can change."""
        serials: dict[str, int] = {}
        changed_any = False
        for name, compiled in snap.zones.items():
            config = compiled.config
            marker = signing_marker(snap, name, now)
            last = self._journal.get(name)
            seen = self._inputs.get(name)
            newest = last[-1] if last else None
            # Inputs: the zone's own configuration, its signing state, and the configuration
            # of its load balancers (an incremental reload keeps an unchanged zone file's
            # Zone but may relink its names to changed load balancers).
            if (
                newest is not None
                and seen is not None
                and seen[0] is config
                and seen[1] == marker
                and seen[2] is snap.config
            ):
                if not config.lb_names or newest.answers.view is view:
                    serials[name] = newest.serial
                    continue
                # Only the health view moved: recompute the names it can change.
                answers = newest.answers.updated(snap, view, compiled, now)
                if answers.total == newest.answers.total:
                    last[-1] = replace(newest, answers=answers)  # type: ignore[index]
                    serials[name] = newest.serial
                    continue
            else:
                self._inputs[name] = (config, marker, snap.config)
                answers = LbAnswers.compute(snap, view, compiled, now)
            content = content_of(snap, name, now, answers)
            previous = self._served.get(name)
            floor = None if config.serial_auto else config.soa.serial
            changed = previous is not None and previous.digest != content.digest
            serial = next_serial(previous.serial if previous else None, changed, floor, now)
            content = _with_serial(content, serial)
            if last and last[-1].serial == serial and last[-1].digest == content.digest:
                last[-1] = content
                serials[name] = serial
                continue
            self._remember(name, content)
            serials[name] = serial
            if previous is None or previous != Served(serial, content.digest):
                changed_any = True
                self._served[name] = Served(serial, content.digest)
                if previous is not None and serial != previous.serial:
                    log.info("zone %s: serial %d -> %d", name, previous.serial, serial)
                    for listener in self.listeners:
                        listener(name, serial)
        if changed_any:
            self._save()
        return with_serials(snap, serials)

    def current(self, zone: str) -> ZoneContent | None:
        journal = self._journal.get(zone)
        return journal[-1] if journal else None

    def version(self, zone: str, serial: int) -> ZoneContent | None:
        """The journalled version with this serial (IXFR's starting point), if kept."""
        for content in self._journal.get(zone, ()):
            if content.serial == serial:
                return content
        return None

    def serials(self) -> dict[str, int]:
        return {zone: served.serial for zone, served in self._served.items()}

    def _remember(self, zone: str, content: ZoneContent) -> None:
        journal = self._journal.setdefault(zone, deque(maxlen=JOURNAL_VERSIONS))
        if len(journal) == journal.maxlen:
            release_later(journal.popleft())  # a big zone's version is freed off the loop
        journal.append(content)
        while len(journal) > 1 and sum(c.size for c in journal) > JOURNAL_RECORDS:
            release_later(journal.popleft())

    def _load(self) -> dict[str, Served]:
        if self._path is None or not self._path.exists():
            return {}
        try:
            if self._path.stat().st_size > MAX_STATE_BYTES:
                raise ValueError("too large")
            document: Any = json.loads(self._path.read_text(encoding="utf-8"))
            return {
                str(zone): Served(int(entry["serial"]) & MASK, str(entry["digest"]))
                for zone, entry in document["zones"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("cannot read %s (%s): serials start afresh from the clock", self._path, exc)
            return {}

    def _save(self) -> None:
        """On an event loop the write (two fsyncs, tens of ms on a busy disk) goes to one
        writer thread, in order; elsewhere (`dnsd export`, tests) it is done here."""
        if self._path is None or not self._persist:
            return
        document = {
            "zones": {
                zone: {"serial": s.serial, "digest": s.digest}
                for zone, s in sorted(self._served.items())
            }
        }
        if _on_event_loop():
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="serials")
            self._writer.submit(self._write, self._path, document)
        else:
            self._write(self._path, document)

    def flush(self) -> None:
        """Wait until every serial handed to the writer thread is on disk."""
        if self._writer is not None:
            self._writer.submit(lambda: None).result()

    @staticmethod
    def _write(path: Path, document: dict[str, Any]) -> None:
        try:
            os.makedirs(path.parent, exist_ok=True)
            write_file(path, json.dumps(document, indent=1) + "\n")
        except OSError as exc:
            log.error("cannot write %s: %s", path, exc)


def _with_serial(content: ZoneContent, serial: int) -> ZoneContent:
    if content.serial == serial:
        return content
    soa = content.soa.copy()
    soa.clear()
    soa.add(content.soa[0].replace(serial=serial), content.soa.ttl)
    return replace(content, soa=soa)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
