"""The services a running server is made of, one module each (listeners, reloading,
systemd, the key and loop watches, …); `dnsd.server` constructs them and starts and stops
them in one named order."""
