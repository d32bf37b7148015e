"""The demo's Git repository (``manage.py seed_demo``, SPEC § 16): the Courtside app's skeleton, a
small Django-like tennis club booking app matching the demo plan's tickets, in a few commits with
fixed authors and dates, so that every seed makes the same history.

Its ``.env`` holds a fake secret: it is on the default deny list (``[repositories] deny``), so the
demo shows that the planner never reads it. The repository is made with the ``git`` command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

NAME: Final = "courtside"  # the repository's folder and its name in DEMO
BRANCH: Final = "main"
AUTHOR: Final = ("Dana Reyes", "dana@courtside.example")
GIT_TIMEOUT: Final = 30  # seconds, per git command
FAKE_SECRET: Final = "sk_test_demo_NOT_A_REAL_KEY_51Hc0urtside"  # noqa: S105 - a fake, for the deny list


@dataclass(frozen=True)
class DemoCommit:
    message: str
    date: str  # ISO 8601, the author's and the committer's
    files: dict[str, str]


README = """\
# Courtside

Court booking for the Riverside Tennis Club: members sign up, see the day's free courts and book
a one-hour slot; the front desk exports the week's bookings.

    python manage.py migrate
    python manage.py runserver

Apps: `accounts` (sign-up, profile), `bookings` (courts, slots, bookings), `payments` (guest fees,
a stub for now).
"""

SETTINGS = """\
\"\"\"Courtside's settings: the secrets come from the environment (.env in development).\"\"\"

import os

SECRET_KEY = os.environ["COURTSIDE_SECRET_KEY"]
DEBUG = os.environ.get("COURTSIDE_DEBUG") == "1"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "accounts",
    "bookings",
    "payments",
]
ROOT_URLCONF = "courtside.urls"
TIME_ZONE = "Europe/London"
USE_TZ = True
# A member may cancel a booking up to this many hours before play (the club's rules).
CANCELLATION_WINDOW_HOURS = 24
"""

URLS = """\
from django.urls import include, path

urlpatterns = [
    path("accounts/", include("accounts.urls")),
    path("bookings/", include("bookings.urls")),
]
"""

ACCOUNTS_MODELS = """\
from django.conf import settings
from django.db import models


class Profile(models.Model):
    \"\"\"A member's club details: the membership number the front desk checks, a phone.\"\"\"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    membership_number = models.CharField(max_length=12, unique=True)
    phone = models.CharField(max_length=30, blank=True)
"""

ACCOUNTS_VIEWS = """\
from django.contrib.auth.forms import UserCreationForm
from django.shortcuts import redirect, render


def signup(request):
    \"\"\"Sign up with an email and a password; the account waits for email verification.\"\"\"
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save(commit=False)
        user.is_active = False  # until the emailed link is followed
        user.save()
        return redirect("accounts:verify-sent")
    return render(request, "accounts/signup.html", {"form": form})
"""

ACCOUNTS_URLS = """\
from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [path("signup/", views.signup, name="signup")]
"""

BOOKINGS_MODELS_V1 = """\
from django.db import models


class Court(models.Model):
    \"\"\"A court of the club, open from opens_at to closes_at.\"\"\"

    name = models.CharField(max_length=40, unique=True)
    opens_at = models.TimeField()
    closes_at = models.TimeField()


class Booking(models.Model):
    \"\"\"A member's one-hour slot on a court.\"\"\"

    court = models.ForeignKey(Court, on_delete=models.CASCADE, related_name="bookings")
    member = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="bookings")
    starts_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # Fixed hourly slots: one booking per court and hour (ADR-001), even under concurrent requests.
        constraints = [models.UniqueConstraint(fields=["court", "starts_at"], name="one_booking_per_slot")]
"""

BOOKINGS_MODELS_V2 = (
    BOOKINGS_MODELS_V1
    + """
    def can_cancel(self, now):
        \"\"\"Whether the member may still cancel: up to the cancellation window before play.\"\"\"
        from datetime import timedelta

        from django.conf import settings

        return now <= self.starts_at - timedelta(hours=settings.CANCELLATION_WINDOW_HOURS)
"""
)

BOOKINGS_VIEWS_V1 = """\
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError
from django.shortcuts import get_object_or_404, redirect, render

from bookings.models import Booking, Court


@login_required
def day_view(request, day):
    \"\"\"The day's courts and their free and booked slots.\"\"\"
    courts = Court.objects.prefetch_related("bookings")
    return render(request, "bookings/day.html", {"courts": courts, "day": day})


@login_required
def book(request, court_id, starts_at):
    \"\"\"Book a free one-hour slot; a slot taken meanwhile is refused, not double booked.\"\"\"
    court = get_object_or_404(Court, pk=court_id)
    try:
        Booking.objects.create(court=court, member=request.user, starts_at=starts_at)
    except IntegrityError:
        return render(request, "bookings/taken.html", status=409)
    return redirect("bookings:day", day=starts_at[:10])
"""

BOOKINGS_VIEWS_V2 = (
    BOOKINGS_VIEWS_V1
    + """

@login_required
def cancel(request, booking_id):
    \"\"\"Cancel the member's own booking, up to the cancellation window before play.\"\"\"
    from django.utils import timezone

    booking = get_object_or_404(Booking, pk=booking_id, member=request.user)
    if not booking.can_cancel(timezone.now()):
        return render(request, "bookings/too_late.html", status=409)
    booking.delete()
    return redirect("bookings:day", day=booking.starts_at.date().isoformat())
"""
)

BOOKINGS_URLS = """\
from django.urls import path

from bookings import views

app_name = "bookings"
urlpatterns = [
    path("<str:day>/", views.day_view, name="day"),
    path("book/<int:court_id>/<str:starts_at>/", views.book, name="book"),
    path("cancel/<int:booking_id>/", views.cancel, name="cancel"),
]
"""

PAYMENTS_STUB = """\
\"\"\"Guest fees by card with Stripe Checkout: not built yet (the plan's payments epic).\"\"\"


def guest_fee_checkout(request, booking_id):
    raise NotImplementedError("Stripe Checkout for guest fees comes with the payments epic.")
"""

TEST_BOOKINGS = """\
from datetime import datetime, timedelta, timezone

from bookings.models import Booking


def test_a_booking_can_be_cancelled_until_the_window():
    starts = datetime(2026, 5, 2, 18, tzinfo=timezone.utc)
    booking = Booking(starts_at=starts)
    assert booking.can_cancel(starts - timedelta(hours=25))
    assert not booking.can_cancel(starts - timedelta(hours=2))
"""

ENV_FILE = f"""\
# Development secrets: never committed in a real project (the demo keeps one to show the deny list).
COURTSIDE_SECRET_KEY=dev-only-courtside-secret
STRIPE_SECRET_KEY={FAKE_SECRET}
"""

COMMITS: Final = (
    DemoCommit(
        "Project skeleton: settings, URLs and the three apps",
        "2026-03-02T09:30:00+00:00",
        {
            "README.md": README,
            "courtside/__init__.py": "",
            "courtside/settings.py": SETTINGS,
            "courtside/urls.py": URLS,
            "accounts/__init__.py": "",
            "bookings/__init__.py": "",
            "payments/__init__.py": "",
            "payments/checkout.py": PAYMENTS_STUB,
            ".env": ENV_FILE,
        },
    ),
    DemoCommit(
        "Accounts: sign-up with email verification, member profile",
        "2026-03-05T14:10:00+00:00",
        {
            "accounts/models.py": ACCOUNTS_MODELS,
            "accounts/views.py": ACCOUNTS_VIEWS,
            "accounts/urls.py": ACCOUNTS_URLS,
        },
    ),
    DemoCommit(
        "Bookings: courts, one-hour slots, no double booking",
        "2026-03-11T10:45:00+00:00",
        {"bookings/models.py": BOOKINGS_MODELS_V1, "bookings/views.py": BOOKINGS_VIEWS_V1},
    ),
    DemoCommit(
        "Cancel a booking up to 24 hours before play",
        "2026-03-18T16:20:00+00:00",
        {
            "bookings/models.py": BOOKINGS_MODELS_V2,
            "bookings/views.py": BOOKINGS_VIEWS_V2,
            "bookings/urls.py": BOOKINGS_URLS,
            "tests/test_bookings.py": TEST_BOOKINGS,
        },
    ),
)

# Whatever the machine's git configuration, the same commits: no hooks, no signing, no templates.
_CONFIG = (
    *("-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "core.autocrlf=false"),
    *("-c", "init.templateDir="),
)


def _git(where: Path, *args: str, date: str | None = None) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(where),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
        "LC_ALL": "C",
    }
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git = shutil.which("git", path=env["PATH"])
    if git is None:
        raise OSError("git is not installed on this server.")
    subprocess.run(  # noqa: S603 - git with fixed arguments, never a shell
        [git, *_CONFIG, *args],
        cwd=where,
        env=env,
        check=True,
        capture_output=True,
        timeout=GIT_TIMEOUT,
    )


def _build(work: Path) -> None:
    _git(work, "init", "-q", "-b", BRANCH)
    for commit in COMMITS:
        for name, text in commit.files.items():
            path = work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "-m", commit.message, date=commit.date)


def demo_repository_ensure(root: Path) -> tuple[Path, bool]:
    """The demo repository at ``root/courtside``, made if missing; whether it was made. It is built
    in a scratch folder beside it and moved into place, so that a seed stopped half way, or two at
    once, leave either no repository or a whole one; one already there is kept as it is."""
    target = root / NAME
    if (target / ".git").is_dir():
        return target, False
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{NAME}-", dir=root))
    try:
        work = scratch / NAME
        work.mkdir()
        _build(work)
        try:
            work.rename(target)
        except OSError:  # made meanwhile by another seed, or a folder in the way
            if not (target / ".git").is_dir():
                raise
            return target, False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target, True
