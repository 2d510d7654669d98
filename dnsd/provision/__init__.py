"""Provisioning: change the configuration directory through the admin API, Redis and
octoDNS while it stays the source of truth (docs/provisioning.md).

`targets` names one entry of the directory, `edit` turns changes into new file texts
(ruamel.yaml, so comments and untouched entries stay as written), `directory` checks the
whole result with the loader and writes it atomically, `writer` serialises writes in a
running server and reloads, `sync` carries them to the other nodes through Redis.
"""
