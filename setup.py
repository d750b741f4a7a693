"""The one native piece of the package: the ``.cast``'s JSON escaping (see castjson.py).

``optional``: without a C compiler the package installs as before and escapes in Python (the
same bytes, more CPU under a flood).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "waaah_agent.core.supervise._jsonbytes",
            ["waaah_agent/core/supervise/_jsonbytes.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
