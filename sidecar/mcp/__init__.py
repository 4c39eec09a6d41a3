"""`libravdb mcp`: the memory as a Model Context Protocol server (a client of the daemon)."""
