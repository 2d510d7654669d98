"""Reloading the server file (`dnsd serve --config FILE`) with the zones.

SIGHUP and `POST /api/v1/reload` read the file again. `tokens` and `webhooks` change live;
every other setting in it (listen addresses, the admin address, workers, …) is bound when
the server starts, so a change to one is named in one log line and in the reload's result,
and keeps its old value until a restart. A file with problems changes nothing: the reload
fails with the file's `file:line: key: message` reasons, like a bad zone file.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from dnsd.admin.gate import Token, TokenGate
from dnsd.admin.webhooks import Alerts, Webhook
from dnsd.errors import ConfigError
from dnsd.serverfile import read, settings

log = logging.getLogger("dnsd.server")
_ABSENT = object()  # a setting the file does not hold


@dataclass(frozen=True, slots=True)
class ServerFileRead:
    """What a reload found in the server file."""

    path: Path
    tokens: tuple[Token, ...]
    webhooks: tuple[Webhook, ...]
    restart_needed: tuple[str, ...]  # settings changed in the file that keep their old value


class ServerFile:
    """The server file a running server was started with, and what it said then."""

    def __init__(
        self,
        path: Path,
        parser: argparse.ArgumentParser,
        explicit: set[str],
        started: dict[str, Any],
    ) -> None:
        self.path = path
        self.parser = parser  # `dnsd serve`'s: values are checked by the flags' own parsers
        self.explicit = frozenset(explicit)  # flags given: they win over the file, always
        self.started = dict(started)  # the file's values at start (what the server runs with)

    def read(self) -> ServerFileRead:
        """The file as it is now; ConfigError (naming the file and line) when it has any
        problem: then nothing of it may change."""
        values, reasons = read(self.path, self.parser)
        if reasons:
            raise ConfigError(reasons)
        changed = [
            key
            for key in settings(self.parser)
            if key not in self.explicit
            and values.get(key, _ABSENT) != self.started.get(key, _ABSENT)
        ]
        return ServerFileRead(
            self.path,
            tuple(values.get("tokens", ())),
            tuple(values.get("webhooks", ())),
            tuple(sorted(changed)),
        )


class LiveSettings(Protocol):
    """What `apply` changes on the running server (dnsd.server.DnsServer)."""

    options: Any  # ServerOptions: tokens and webhooks are replaced
    alerts: Alerts

    def admin_tokens(self) -> tuple[Token, ...]: ...

    def admin_gate(self) -> TokenGate | None: ...


def apply(server: LiveSettings, filed: ServerFileRead) -> None:
    """Tokens and webhooks take effect now; the other changes are logged (once a reload)."""
    options = server.options
    if filed.tokens != options.tokens or filed.webhooks != options.webhooks:
        server.options = replace(options, tokens=filed.tokens, webhooks=filed.webhooks)
    gate = server.admin_gate()
    if gate is not None:
        gate.tokens = server.admin_tokens()  # the next request is checked against these
    if filed.webhooks != server.alerts.hooks:
        server.alerts.replace(filed.webhooks)
    if filed.restart_needed:
        log.warning(
            "server file %s: %s changed and need a restart; they keep their old value",
            filed.path,
            ", ".join(filed.restart_needed),
        )
