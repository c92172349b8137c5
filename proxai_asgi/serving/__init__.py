"""The responders for one request: the exchange, relaying (pass-through), translating, the
other endpoints, and what guards them (origins, key masking, telemetry)."""
