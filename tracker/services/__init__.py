"""The tracker's write services, one module per concept."""
