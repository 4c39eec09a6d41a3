"""Memory over time: dream entries and their promotion (``dream``, ``dreams``), the host
lifecycle journal (``journal``) and forgetting a namespace (``forget``). Imports
``memory.core``, ``memory.service`` and ``sidecar.store``."""
