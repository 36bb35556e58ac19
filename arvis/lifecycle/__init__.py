"""The governed tool.execute lifecycle (DESIGN §2, §4): authorization, manager,
syscall handler, outbox, dispatch glue, journal, replay and recovery."""
