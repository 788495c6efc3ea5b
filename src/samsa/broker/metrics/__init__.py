"""The broker's metrics: counted on the hot path, exported to Prometheus on request.

- :mod:`~samsa.broker.metrics.stats` — the counters and latency histograms the
  broker updates as it works (per request, per batch, per partition read; never
  per record). Plain Python numbers owned by the event loop; imports nothing
  else, so a broker without a metrics listener pays only for the additions.
- :mod:`~samsa.broker.metrics.collector` — at scrape time, a snapshot of those
  counters and of the broker's state (log sizes, offsets, group lag, ISRs…),
  turned into Prometheus metric families with ``prometheus_client``.
- :mod:`~samsa.broker.metrics.exporter` — the ``metrics.listeners`` HTTP
  endpoint answering ``GET /metrics`` on the broker's loop.

Every metric and its labels: ``docs/metrics.md``.
"""
