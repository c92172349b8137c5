"""The responders for one request: the exchange, generation (failover over a route's
targets, one attempt each, continuation), the other endpoints, and what guards them
(origins, key masking, telemetry)."""
