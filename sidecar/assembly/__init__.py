"""Assembly: what goes into the prompt for one turn, under a token budget.

Pure planning: ``budget`` (token shares), ``temporal`` (dates in the query),
``candidates`` (a record as the ranking sees it, with its cached features), ``scoring``
(candidate scores from dense, lexical and temporal signals), ``render`` (the text the host
injects), ``window`` (which host messages stay), ``selection`` (the plan's items, config
and hooks), ``fill`` (budget filling and the last step) and ``plan`` (the assembly plan
tying them together). Services: ``cache`` (per-collection vectors, candidates and
lexical indexes kept in step with the store), ``search`` and ``service`` (the ``assemble``
/ ``search`` service over the cache). ``heap`` keeps the caches off the garbage collector.

Reads what ``sidecar.memory`` wrote; imports ``sidecar.memory``, ``sidecar.engines`` and
``sidecar.store``. Nothing below imports this package.
"""
