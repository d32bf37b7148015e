"""Signals the domain sends for the live runtime to follow (the domain never imports it).

The runtime connects to them when the app is ready (``planner/apps.py``); each is sent after the
commit of what it reports, in the thread that committed.
"""

from django.dispatch import Signal

# A question's outcome was committed (answered, left to the humans, withdrawn):
# ``question_id``. Its waiters, in every process, read it again (``planner/live/question_waits.py``).
question_settled = Signal()
