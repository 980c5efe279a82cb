"""The Cassandra deployment kind."""
