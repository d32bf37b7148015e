"""This process's live side: the hub that owns its turns and watchers, the runner that gives a
message its meaning, the turns themselves, and the links to other processes
(``docs/architecture.md``)."""
