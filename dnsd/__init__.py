"""dnsd: an authoritative DNS server for failover and geo-steering."""

__version__ = "0.1.0"
