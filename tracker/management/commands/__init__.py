"""The tracker's manage.py commands."""
