"""The package version, in one place.

``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``, statically, without importing the
package), ``ambitab_gym.__version__`` re-exports it, and ``CHANGELOG.md`` has a section for it
(``tests/test_packaging.py`` checks all three agree with the built wheel).

>>> import re
>>> bool(re.fullmatch(r"\\d+\\.\\d+\\.\\d+", __version__))
True
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
