"""Memory over time: dream entries and their promotion (``dream``, ``dreams``), the host
lifecycle journal (``journal``), forgetting a namespace (``forget``) and
:class:`~sidecar.memory.lifecycle.namespace_memory.NamespaceMemory`, the service behind
``memory.*``, ``sessions.list`` and ``forget``. Imports ``memory.core``, ``memory.service``
and ``sidecar.store``."""
