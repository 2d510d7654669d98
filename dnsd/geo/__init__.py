"""Client location: regions table, GeoIP lookups, EDNS Client Subnet."""
