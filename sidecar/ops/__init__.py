"""Daily operations: the service unit, doctor, backup and restore, stats."""
