"""The ground floor: settings, paths, errors and warehouse access. Imports none of the parts."""

__all__ = ["__version__"]
__version__ = "0.1.0"
