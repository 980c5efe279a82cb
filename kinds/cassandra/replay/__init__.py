"""The live replay's load generators for Cassandra: a plan's requests sent open loop through the deployment's
real driver (the Java driver 4 for `java4`, the Python driver for `python`), measured (`generator`)."""
