"""What the admin API, the status document and the metrics need from a running server.

A narrow seam: `dnsd.admin` depends on this protocol, never on `dnsd.server` or `dnsd.serve`
(the server's admin listener builds the admin app with the server passed in), so there is
no import cycle, not even for types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from dnsd.admin.metrics import Metrics
from dnsd.health.store import HealthStore
from dnsd.reload_result import ReloadResult
from dnsd.snapshot import SnapshotHolder

if TYPE_CHECKING:
    from dnsd.provision.writer import ConfigWriter


class ServerControl(Protocol):
    @property
    def holder(self) -> SnapshotHolder:
        """The snapshot being served."""

    @property
    def store(self) -> HealthStore:
        """Health, overrides and events."""

    @property
    def metrics(self) -> Metrics:
        """The registry `/metrics` renders."""

    @property
    def ready(self) -> bool:
        """Config loaded and the first probe round done."""

    @property
    def config_writer(self) -> ConfigWriter | None:
        """Config API writes (the main process only; None in a `--workers` process)."""

    def bus_status(self) -> dict[str, Any] | None:
        """The Redis health bus (url, node, connected), None without one."""

    async def reload(self) -> ReloadResult:
        """Load the config again; on any error keep serving the old snapshot."""
