"""Several dnsd nodes as one cluster through Redis: the connection (plain, TLS, ACL user,
Sentinel), sealed messages, and the channels that ride on it — health and config."""
