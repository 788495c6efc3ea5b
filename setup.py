"""The one thing pyproject.toml cannot say: samsa's optional C helper.

``samsa.records._native`` is built when a C compiler and Python's headers are
there; without them the build goes on without it (``optional=True``) and samsa
uses its numpy/Python paths instead (``samsa.spark.columns``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "samsa.records._native",
            ["src/samsa/records/_native.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
