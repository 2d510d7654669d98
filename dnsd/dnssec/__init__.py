"""DNSSEC, signed online: keys in the state directory (`keys`), and every
RRset of a reply signed as it leaves (`signer`), denial of existence included."""
