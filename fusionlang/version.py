"""fusionlang's version, in a module of its own so the backend can key its kernel cache on
it without importing the package's front door (which imports the backend)."""

__version__ = "0.1.0"
