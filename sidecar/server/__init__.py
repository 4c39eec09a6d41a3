"""Transport and dispatch layers: NDJSON framing, JSON-RPC decoding, connections, listeners."""
