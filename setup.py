"""The package's three native pieces: the ``.cast``'s JSON escaping (see castjson.py), what a
terminal shows of a raw stream, for the known secrets' look through escapes (see separators.py),
and the reads a wake-up finds ready on the agent's PTY, in one call (see child.py).

``optional``: without a C compiler the package installs as before and does all three in Python
(the same bytes, more CPU under a flood).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "waaah_agent.core.supervise._jsonbytes",
            ["waaah_agent/core/supervise/_jsonbytes.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "waaah_agent.core.secrets._visible",
            ["waaah_agent/core/secrets/_visible.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "waaah_agent.runtime.supervise._ptyread",
            ["waaah_agent/runtime/supervise/_ptyread.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
