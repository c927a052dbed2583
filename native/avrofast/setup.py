"""Builds the rllm_avrofast C extension (plain CPython API, no dependencies)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rllm_avrofast",
            sources=["rllm_avrofast.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
        )
    ]
)
