"""Trace-to-trace transforms, one module each."""
