"""An app module that fails while it is imported (for the worker's bad-import test)."""

raise RuntimeError("this module fails to import on purpose")
