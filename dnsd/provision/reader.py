"""Config API reads that cannot stall serving.

Parsing a 60,000-record zone file takes seconds of pure Python; done on every GET (even
in a thread, which holds the interpreter lock), a read-only token made DNS answers time
out. So each file is parsed once per version (its size, mtime and inode), in a separate
process (the serving process's interpreter lock is never held for it; a thread when no
process can be started), and kept as plain JSON data; every read is then a lookup in that
parsed copy, in a thread. `GET /api/v1/config` is paged: at most `PAGE_MAX` record names
a response, `next_offset` while there are more.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from dnsd.config.files import UnsafeFile, read_config_file
from dnsd.config.yamlio import YamlSyntaxError, load_yaml
from dnsd.provision.edit import ChangeRefused, lookup
from dnsd.provision.targets import SECTIONS, Target

log = logging.getLogger("dnsd.provision")
PAGE_MAX = 10_000  # record names in one GET /api/v1/config response
MAX_FILES = 10_000
Signature = tuple[int, int, int]


def parse_file(directory: str, name: str) -> tuple[bool, str, bytes]:
    """(True, the file as JSON text, the SHA-256 of the text it came from) or (False, why
    not, b""): runs in the parser process."""
    try:
        text = read_config_file(Path(directory), Path(directory) / name)
        digest = hashlib.sha256(text.encode()).digest()
        return True, json.dumps(load_yaml(text), default=str), digest
    except YamlSyntaxError as exc:
        return False, f"{name}:{exc.line}: {exc.message}", b""
    except (OSError, UnsafeFile, UnicodeDecodeError) as exc:
        return False, f"{Path(directory) / name}: cannot read: {exc}", b""


def signatures(directory: Path) -> dict[str, Signature]:
    out = {}
    for path in sorted(directory.glob("*.yaml"))[:MAX_FILES]:
        with contextlib.suppress(OSError):
            st = path.stat()
            out[path.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


class ConfigReader:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # file name → (its signature, the SHA-256 of the text parsed, that text as JSON data)
        self._files: dict[str, tuple[Signature, bytes, Any]] = {}
        self._lock = asyncio.Lock()  # one refresh at a time; the others wait for it
        self._pool: ProcessPoolExecutor | None = None
        self.parsed = 0  # files parsed (a metric for tests: reads do not parse again)

    async def docs(self) -> dict[str, Any]:
        """Every file as dnsd's loader reads it, as JSON data; ChangeRefused (400) when
        one does not parse."""
        async with self._lock:
            now = await asyncio.to_thread(signatures, self.directory)
            for name, sig in now.items():
                cached = self._files.get(name)
                if cached is None or cached[0] != sig:
                    ok, text, digest = await self._parse(name)
                    if not ok:
                        raise ChangeRefused(400, text)
                    self._files[name] = (sig, digest, await asyncio.to_thread(json.loads, text))
                    self.parsed += 1
            for gone in set(self._files) - set(now):
                del self._files[gone]
            return {name: self._files[name][2] for name in now}

    def known(self) -> dict[str, tuple[bytes, Any]]:
        """What the reads parsed so far, without parsing anything: per file the SHA-256 of
        the text and that text as JSON data (a config write uses an entry only while the
        file's text still has that digest)."""
        return {name: (digest, doc) for name, (_, digest, doc) in self._files.items()}

    async def _parse(self, name: str) -> tuple[bool, str, bytes]:
        if self._pool is None:
            try:  # spawn: no copy of the serving threads' state (fork with threads is unsafe)
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(1, mp_context=context)
            except (OSError, ValueError) as exc:
                log.warning("config reads parse in a thread (%s)", exc)
        if self._pool is not None:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(self._pool, parse_file, str(self.directory), name)
            except (BrokenProcessPool, OSError) as exc:
                log.warning("config parser process failed (%s): parsing in a thread", exc)
                self._pool = None
        return await asyncio.to_thread(parse_file, str(self.directory), name)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def read(self, target: Target) -> Any:
        docs = await self.docs()
        return await asyncio.to_thread(_entry, docs, target)

    async def page(self, zone: str | None, offset: int, limit: int) -> bytes:
        """One page of GET /api/v1/config as JSON bytes (built and encoded in a thread)."""
        docs = await self.docs()
        return await asyncio.to_thread(_page, docs, zone, offset, min(limit, PAGE_MAX))


def _entry(docs: dict[str, Any], target: Target) -> Any:
    return lookup(docs, target)


def _page(docs: dict[str, Any], zone: str | None, offset: int, limit: int) -> bytes:
    """{"zones": {ZONE: {"file", "ttl", "records": {...}}}, "pools", "monitors",
    "load_balancers", "total_records", "offset", "next_offset"?}: record names in file
    order, zones in file-name order; `zone` keeps one zone only."""
    out: dict[str, Any] = {"zones": {}, **{s: {} for s in SECTIONS.values()}}
    seen = 0
    for file, doc in sorted(docs.items()):
        if not isinstance(doc, dict):
            continue
        for section in SECTIONS.values():
            if isinstance(doc.get(section), dict):
                out[section].update(doc[section])
        if "zone" not in doc:
            continue
        name = str(doc["zone"]).lower().rstrip(".")
        if zone is not None and name != zone:
            continue
        records: dict[str, Any] = doc["records"] if isinstance(doc.get("records"), dict) else {}
        keys = list(records)
        start, end = max(offset - seen, 0), max(min(offset + limit - seen, len(keys)), 0)
        seen += len(keys)
        if start < end or not keys:
            part = {k: records[k] for k in keys[start:end]}
            out["zones"][name] = {"file": file, "ttl": doc.get("ttl", 3600), "records": part}
    out["total_records"] = seen
    out["offset"] = offset
    if offset + limit < seen:
        out["next_offset"] = offset + limit
    return json.dumps(out).encode()
