"""Management commands of the ballet app."""
