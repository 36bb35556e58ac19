"""Evidence that outlives the database: signing keys, witnesses, checkpoint checks, bundles.

An adapter (docs/architecture.md): it implements the checkpoint ports of
``arvis.lifecycle.evidence.checkpoints`` with Ed25519 keys held in a file and with witnesses
outside the database, and it reads bundles offline, with no store at all.
"""
