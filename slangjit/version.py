"""The package version (a leaf module: the caches key by it without importing the package root)."""
__version__ = "0.1.0"
