"""Adapter: delivering notifications to webhooks over HTTP (see :mod:`arvis.webhooks.deliverer`)."""
