"""The content of the demo project ``seed_demo`` builds: a plan, knowledge and a planner skill.

Courtside is a small web app a two-person team builds for a tennis club:
members book courts, guests pay their fee, everyone gets reminders. Only data
lives here; ``seed_demo`` writes it through the services.
"""

from __future__ import annotations

from dataclasses import dataclass

ORGANIZATION_SLUG = "demo"
ORGANIZATION_NAME = "Demo Org"
PROJECT_KEY = "DEMO"
PROJECT_NAME = "Courtside"
PROJECT_DESCRIPTION = (
    "Court booking for the Riverside Tennis Club: members book courts online, "
    "guests pay their fee by card, and everyone gets a confirmation and a reminder."
)
SKILL_NAME = "planner"


@dataclass(frozen=True)
class ItemSpec:
    """One item of the plan; ``states`` is its history, the last one is where it is now."""

    ref: str
    kind: str
    title: str
    states: tuple[str, ...]
    description: str = ""
    criteria: tuple[str, ...] = ()
    epic: str | None = None
    milestone: str | None = None
    blockers: tuple[str, ...] = ()


@dataclass(frozen=True)
class KnowledgeSpec:
    """One knowledge entry linked to the project and to items by ref; ``revised_body`` updates it once."""

    kind: str
    title: str
    body: str
    items: tuple[str, ...] = ()
    revised_body: str | None = None


MILESTONES = (
    ItemSpec(
        ref="beta",
        kind="milestone",
        title="Private beta for club members",
        states=("open",),
        description=(
            "About forty members (the committee and the coaches) sign up, see which courts are "
            "free and book them. Invitation only; no payments yet."
        ),
    ),
    ItemSpec(
        ref="launch",
        kind="milestone",
        title="Public launch",
        states=("open",),
        description=(
            "Every member and their guests can book. Guests pay the guest fee by card, "
            "everyone gets a confirmation and a reminder, and the front desk can export the week."
        ),
    ),
)

EPICS = (
    ItemSpec(
        ref="accounts",
        kind="epic",
        title="Accounts and sign-in",
        states=("open",),
        milestone="beta",
        description="Members sign up with their email address, verify it, and manage their profile.",
    ),
    ItemSpec(
        ref="booking",
        kind="epic",
        title="Court booking",
        states=("open",),
        milestone="beta",
        description=(
            "See availability, book and cancel a court under the club's rules "
            "(*Booking rules of the Riverside Tennis Club* in the knowledge base)."
        ),
    ),
    ItemSpec(
        ref="payments",
        kind="epic",
        title="Payments and notifications",
        states=("open",),
        milestone="launch",
        description="Guest fees by card, confirmation and reminder emails.",
    ),
)

TICKETS = (
    ItemSpec(
        ref="skeleton",
        kind="ticket",
        title="Project skeleton with CI and a staging deploy",
        states=("ready", "in_progress", "done"),
        milestone="beta",
        description=(
            "Django project with a settings split, a GitHub Actions workflow that runs the tests "
            "and the linters, and a deploy of `main` to the staging host."
        ),
        criteria=(
            "`make test` runs the linters, the type checker and the tests.",
            "Every push to `main` deploys to staging within ten minutes.",
        ),
    ),
    ItemSpec(
        ref="signup",
        kind="ticket",
        title="Sign up with email and password, with email verification",
        states=("ready", "in_progress", "in_review", "done"),
        epic="accounts",
        milestone="beta",
        blockers=("skeleton",),
        description=(
            "A visitor signs up with email and password. The account stays inactive until the "
            "link in the verification email is opened.\n\n"
            "Out of scope: social login."
        ),
        criteria=(
            "Signing up sends one verification email with a link valid for 48 hours.",
            "An unverified account cannot sign in and is told why.",
            "Signing up twice with the same email does not reveal that the address exists.",
        ),
    ),
    ItemSpec(
        ref="reset",
        kind="ticket",
        title="Reset a forgotten password by email",
        states=("ready",),  # the agent claims it and reports it done: it waits in review (WORK below)
        epic="accounts",
        milestone="beta",
        blockers=("signup",),
        description="Django's password reset views, styled like the rest of the site.",
        criteria=(
            "The reset link works once and expires after one hour.",
            "The form answers the same whether or not the address has an account.",
        ),
    ),
    ItemSpec(
        ref="profile",
        kind="ticket",
        title="Member profile with membership number and phone",
        states=("ready",),
        epic="accounts",
        milestone="beta",
        blockers=("signup",),
        description=(
            "Members enter their club membership number and a phone number the front desk can "
            "call when a court closes for rain."
        ),
        criteria=(
            "A membership number is 5 digits and unique.",
            "The phone number is stored in E.164 format.",
        ),
    ),
    ItemSpec(
        ref="courts",
        kind="ticket",
        title="Courts and opening hours in the admin",
        states=("ready",),  # the agent claims it, reports it done, the owner accepts it (WORK below)
        epic="booking",
        milestone="beta",
        blockers=("skeleton",),
        description="The club secretary maintains the six courts and their opening hours in the admin.",
        criteria=(
            "A court has a name, a surface and whether it is floodlit.",
            "Opening hours are set per weekday; a court can be closed for a date range.",
        ),
    ),
    ItemSpec(
        ref="grid",
        kind="ticket",
        title="Day view of court availability",
        states=("ready",),  # the agent claims it and reports progress (WORK below)
        epic="booking",
        milestone="beta",
        blockers=("courts",),
        description=(
            "A grid of courts by hour for one day, free slots as links. It must stay usable on "
            "a phone held upright: courts scroll sideways, hours stay visible."
        ),
        criteria=(
            "Free, booked and closed slots are told apart without relying on colour.",
            "The page answers in under 300 ms with six courts and a full day.",
            "Yesterday cannot be shown; the next 14 days can.",
        ),
    ),
    ItemSpec(
        ref="book",
        kind="ticket",
        title="Book a free one-hour slot",
        states=("ready",),
        epic="booking",
        milestone="beta",
        blockers=("grid", "signup"),
        description=(
            "A signed-in member picks a free slot in the day view and confirms. The rules are "
            "in *Booking rules of the Riverside Tennis Club*."
        ),
        criteria=(
            "A member holds at most two upcoming bookings.",
            "A booked slot shows as booked to everyone else at once.",
            "The member sees the booking under *My bookings*.",
        ),
    ),
    ItemSpec(
        ref="double",
        kind="ticket",
        title="Reject double bookings under concurrent requests",
        states=("ready",),
        epic="booking",
        milestone="beta",
        blockers=("book",),
        description=(
            "Two members who book the same slot at the same moment must not both succeed. "
            "See ADR-001 for the approach."
        ),
        criteria=(
            "A test books one slot from two threads; exactly one booking succeeds.",
            "The losing member is told the slot was just taken and sees the grid again.",
        ),
    ),
    ItemSpec(
        ref="cancel",
        kind="ticket",
        title="Cancel a booking up to 24 hours before play",
        states=("draft",),
        epic="booking",
        milestone="beta",
        blockers=("book",),
        description="Members cancel their own bookings from *My bookings*.",
        criteria=(
            "A booking can be cancelled until 24 hours before it starts.",
            "A cancelled slot is free again at once.",
        ),
    ),
    ItemSpec(
        ref="export",
        kind="ticket",
        title="Export a week's bookings as CSV for the front desk",
        states=("ready",),
        epic="booking",
        milestone="launch",
        blockers=("courts",),
        description="The front desk prints the week's bookings every Monday morning.",
        criteria=(
            "The CSV has one row per booking: date, hour, court, member name and number.",
            "Only staff can download it.",
        ),
    ),
    ItemSpec(
        ref="email",
        kind="ticket",
        title="Send transactional email through Postmark",
        states=("ready",),
        epic="payments",
        milestone="launch",
        blockers=("skeleton",),
        description="An email backend for Postmark, with a plain-text and an HTML part per message.",
        criteria=(
            "Sending fails loudly in staging when the API token is missing.",
            "Bounces are logged with the recipient and the reason.",
        ),
    ),
    ItemSpec(
        ref="confirm",
        kind="ticket",
        title="Confirmation email after booking",
        states=("ready",),
        epic="payments",
        milestone="launch",
        blockers=("email", "book"),
        description="Sent right after a booking, with an iCalendar attachment.",
        criteria=(
            "The email names the court, the date and the hour in the club's time zone.",
            "The attached .ics event opens in Google Calendar and Apple Calendar.",
        ),
    ),
    ItemSpec(
        ref="reminder",
        kind="ticket",
        title="Reminder email two hours before play",
        states=("draft",),
        epic="payments",
        milestone="launch",
        blockers=("confirm",),
        description="A periodic task sends a reminder two hours before each booking.",
        criteria=("Each booking gets at most one reminder, even if the task runs twice.",),
    ),
    ItemSpec(
        ref="guest",
        kind="ticket",
        title="Pay the guest fee by card with Stripe Checkout",
        states=("draft",),
        epic="payments",
        milestone="launch",
        blockers=("book",),
        description=(
            "A member who brings a guest pays the £8 guest fee when booking. The booking is "
            "held for 15 minutes while Checkout is open."
        ),
        criteria=(
            "An unpaid hold is released after 15 minutes.",
            "A paid booking survives a webhook that arrives before the redirect.",
        ),
    ),
)

ADR_BODY = """## Context

Two members can open the same free slot and confirm within the same second.
Slots are fixed: one hour, starting on the hour.

## Decision

A booking stores its court and start time, with a unique constraint on
`(court, starts_at)` for bookings that are not cancelled. The view catches the
`IntegrityError` and tells the member the slot was just taken.

## Status

Proposed.
"""

KNOWLEDGE = (
    KnowledgeSpec(
        kind="document",
        title="Booking rules of the Riverside Tennis Club",
        items=("book", "cancel", "guest"),
        body="""The committee's rules, as agreed on 12 February.

- Courts open 07:00 to 22:00; floodlit courts 1 and 2 until 22:00 in winter, the others until dusk.
- A booking is one hour, starting on the hour.
- A member holds at most **two** upcoming bookings.
- A member may bring one guest per booking; the guest fee is **£8**.
- Bookings can be cancelled up to **24 hours** before play. Later, call the front desk.
- Two no-shows in a month suspend online booking for two weeks.
""",
    ),
    KnowledgeSpec(
        kind="decision",
        title="ADR-001: Fixed hourly slots with a unique constraint against double booking",
        items=("double",),
        body=ADR_BODY,
        revised_body=ADR_BODY.replace("Proposed.", "Accepted on 3 March by Priya and Tom.")
        + """
## Consequences

- Works the same on SQLite in development and PostgreSQL in production.
- Half-hour slots would need a different approach (an exclusion constraint).
""",
    ),
    KnowledgeSpec(
        kind="note",
        title="Committee meeting, 4 March: beta feedback",
        items=("grid", "book"),
        body="""- The day view is hard to read on a phone; the hours should stay visible while scrolling.
- Several members asked for a **waitlist** when every court is booked on Saturday mornings.
- The front desk still wants a printed list every Monday.
""",
    ),
    KnowledgeSpec(
        kind="debt",
        title="Availability grid runs one query per court",
        items=("grid",),
        body="""The day view loads bookings court by court: 6 queries for a day, 84 for the
two-week overview we want next. Load a day's bookings in one query and group
them in Python before the overview is built.
""",
    ),
)

SKILL_V1 = """---
name: planner
description: How the Courtside team shapes its plan. Read before proposing a changeset.
---

# Planning Courtside

- A ticket is one reviewable pull request: at most about a day of work.
- Every ticket states its acceptance criteria as behaviour a member, a guest
  or the front desk can observe. No criteria about code structure.
- New tickets start as `draft`. Move a ticket to `ready` only when its
  criteria are complete and its blockers are known.
- Put every ticket under an epic and a milestone.
- Never mark a ticket `done`: the team does that when it is deployed.
"""

SKILL_V2 = (
    SKILL_V1
    + """- Anything touching money (guest fees, refunds) links the decision that
  settled it, and names the failure case in its acceptance criteria.
- Check the club's rules in *Booking rules of the Riverside Tennis Club*
  before proposing booking tickets; quote the rule you rely on.
- Keep a changeset to one topic and at most ten operations, with a rationale
  that says what the humans asked for.
"""
)

# The worker agent's day (docs/domain.md#work): it carried "courts" to done, reported "reset" done
# (it waits in review for the owner), and is on "grid".
COURTS_PROGRESS = "Courts with surface and floodlights are editable in the admin; opening hours next."
COURTS_DONE = """Courts and their opening hours are maintained in the admin.

- `Court` (name, surface, floodlit) and `OpeningHours` (per weekday) with their migrations
- closures for a date range, validated: the end is not before the start
- admin inlines, so the secretary edits a court's hours on the court's page"""
COURTS_LINKS = ("https://git.example.com/courtside/courtside/pull/12",)
RESET_DONE = """Password reset works through Django's views, styled like the rest of the site.

- the link is single-use and expires after one hour (`PASSWORD_RESET_TIMEOUT = 3600`)
- the form answers "If the address has an account, we sent a link" either way
- tests cover an expired link, a reused link and an unknown address"""
RESET_LINKS = ("https://git.example.com/courtside/courtside/pull/14",)
# The agent's note on the ticket it reported, mentioning the owner (docs/domain.md#people).
RESET_COMMENT = (
    "@demo one thing for your review: the plain-text part of the reset mail shows the link twice. "
    "I left it for a follow-up rather than widen this ticket; **accept** it if that is fine."
)
# A second project of the organization, to which the owner invited ``viewer`` (who has not answered).
WEBSITE_KEY = "WEB"
WEBSITE_NAME = "Club website"
WEBSITE_DESCRIPTION = "The club's public pages: news, opening hours and how to join."
GRID_PROGRESS = (
    "The day grid renders six courts by hour. Working on the upright phone layout: courts scroll "
    "sideways while the hours column stays put."
)

CHANGESET_TITLE = "Add a waitlist for fully booked slots"
CHANGESET_RATIONALE = (
    "Members asked for a waitlist at the committee meeting on 4 March (see the meeting note). "
    "The waitlist needs booking to exist first. While here: the cancellation rules are settled "
    "in the booking rules document, so the cancellation ticket can become ready."
)
WAITLIST_TICKET = {
    "title": "Join the waitlist for a fully booked slot",
    "state": "draft",
    "description": (
        "When every court is booked at an hour, a member can join that hour's waitlist. "
        "When a booking is cancelled, the first member on the list is offered the slot by email."
    ),
    "acceptance_criteria": [
        "A member is on at most three waitlists at a time.",
        "An offer is held for 30 minutes, then passes to the next member.",
        "Joining a waitlist counts towards the two-booking limit only once the offer is accepted.",
    ],
}
CANCEL_EXTRA_CRITERION = "Inside 24 hours the page shows the front desk's phone number instead."
