"""The one compiled part of frwatch: the common case of the summarizer's per-entry loop
(analyzers/frwatch_analyzers/decode/_fastscan.c). Everything else is in pyproject.toml.

Optional: where no C compiler (or no Python headers) is found, the build goes on without it and the
analyzer runs its pure-Python loop, with the same results (frwatch_analyzers/decode/fastscan.py says which runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "frwatch_analyzers.decode._fastscan",
            sources=["analyzers/frwatch_analyzers/decode/_fastscan.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
