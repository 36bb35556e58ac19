"""Agent frameworks with ARVIS as their tool executor. Each needs its framework installed
(an optional extra) and talks to ARVIS through :mod:`arvis.client` only."""
