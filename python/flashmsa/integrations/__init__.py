"""Integrations of flashmsa with other libraries (import each submodule to use it)."""
