"""One sub-package per wire protocol; each exposes ``CODEC``."""
