"""`libravdb ui`: the memory browser, a local web app that is a client of the daemon."""
