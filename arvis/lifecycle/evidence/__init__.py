"""Evidence (DESIGN §10): signed checkpoints, the witness feed and its cross-check,
and the one verify service the API, the CLI and the console call."""
