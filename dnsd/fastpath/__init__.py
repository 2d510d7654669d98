"""The answer cache in front of `resolve`: same bytes, a fraction of the work.

A query of the common shape (QUERY, one uncompressed question, no records but at most one
OPT of version 0) is keyed by its lower-case name, type, class and EDNS shape (DO, the UDP
size class, ECS present, COOKIE present). Everything else — and every first query of a key —
goes through `resolve` unchanged.

* Static answers are cached as finished wire bytes; per query only the ID, RD/CD, the
  question's case, the ECS echo and the COOKIE option (the client's cookie and a fresh
  server cookie for this client: what `dig` sends by default) are written in. A query
  with a cookie is never remembered by its bytes (the answer tables both serving loops
  walk), since every reply must carry a fresh server cookie.
* Load-balanced answers cache the steering *plan* per client location (region, country,
  zone, …), the plan compiled into its draws (`select.compile_plan`), and the finished
  bytes per *outcome* reached, so trickle and random selection stay statistically exact
  and the bytes equal the full path's for the same random source
  (tests/property/test_fastpath_identity.py and test_draws_explain.py check that).

What a repeated query needs is compiled into an *answer table* (dnsd.answer_table): the
draws with their cumulative weights, the finished replies, the counters each answer bumps.
Both serving loops walk that table — the pure one with `answer_table.walk`, the compiled
one in C — and every decision was made here when it was built; what a walk cannot finish
(an outcome without a reply yet, another client) comes back here with what it drew.

Caches are invalidated by generation — a new snapshot (config, served SOA serials), and health *states* (verdicts, overrides,
trickle) — never by scanning. A plan is kept by the key steering returns with it (the
client fields it read, dnsd/steering/plan_key.py) and only as long as steering says it
holds (`LbPlan.until`, `per_view`); this cache knows nothing of what steering reads.

The package: `query_key` (the key of a reusable query), `memo` (what is kept per key and per
client), `replies` (templates and finishing), `counters` (what the tables count) and
`cache` (AnswerCache, AnswerCaches: the answer path itself).
"""

from dnsd.fastpath.cache import MAX_ENTRIES, AnswerCache, AnswerCaches
from dnsd.fastpath.query_key import Parsed, parse

__all__ = ["MAX_ENTRIES", "AnswerCache", "AnswerCaches", "Parsed", "parse"]
