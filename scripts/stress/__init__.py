"""`make stress`: the reliability suites (fuzz, crash, soak, faults) against the real
daemon process. Each part is a function returning a :class:`~scripts.stress.common.Report`;
``python -m scripts.stress`` runs them at full size and writes docs/benchmarks.md
§ reliability, and tests/stress runs each at smoke size inside ``make test``."""
