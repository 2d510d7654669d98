"""Working with the rest of DNS: zone content and serials, zone transfers (AXFR/IXFR),
TSIG, NOTIFY, and zone files out.

* `content` — what a zone transfers: static records plus each load-balanced name's
  current answer for a client with no location (pure);
* `serials` — RFC 1982 serial arithmetic and the serial rule (pure);
* `versions` — the served serial and the IXFR journal of each zone, persisted;
* `tsig` — signing and checking messages with dnspython's TSIG;
* `outgoing` — AXFR/IXFR responses for a query (pure over a version);
* `notify` — telling secondaries of a new serial;
* `zonetext` — RFC 1035 text of a zone (`dnsd export`) and YAML from a zone file
  (`dnsd import`).
"""
