"""Client quotas: byte rates and request time per user and client id (Kafka's quotas)."""
