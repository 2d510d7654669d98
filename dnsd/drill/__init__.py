"""Failover drills: demo backends, fault injection and measurements."""
