"""`/metrics` in the Prometheus exposition format: the service's figures read from the metadata DB at scrape time
(`control.metrics`), as `prometheus_client` metric families; on the API behind the read scope or on a port of
their own (`metrics_port`). docs/operations.md § Metrics and the dashboard lists them."""
