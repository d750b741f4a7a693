"""Secrets: which values are secrets (secretenv), what keys and tokens look like (shapes), where
known values are in terminal output however they arrive (secretscan, separators), and the
masking of everything written or printed (redact; rawshapes on the raw stream). Pure."""
