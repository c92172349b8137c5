"""The standalone server: the command line, its configuration, the demo upstream and the
worker processes."""
