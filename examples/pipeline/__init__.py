"""The click-events pipeline: synthetic clicks → samsa → Spark windowed counts → samsa + Parquet.

``make pipeline`` (``python -m examples.pipeline``) runs all of it on this machine.
"""
