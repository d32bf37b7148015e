"""``manage.py`` commands of the ballet app."""
