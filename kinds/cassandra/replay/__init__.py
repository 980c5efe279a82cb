"""The live replay for Cassandra: the load generators — a plan's requests sent open loop through the deployment's
real driver (the Java driver 4 for `java4`, the Python driver for `python`), measured (`generator`) — and the
replay driver that runs them on twin scratch tables (`live`; docs/replay.md)."""
