"""The governed tool.execute lifecycle (DESIGN §2, §4). The corridor a syscall walks —
``syscalls`` (the one edge), ``authorization``, ``admission``, ``effects``,
``settlement``, ``journal`` — with ``replay``, ``recovery`` and ``lease`` beside it;
``policy/``, ``consent/`` and ``evidence/`` are the rooms it calls into."""
