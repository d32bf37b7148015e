# ruff: noqa: E501 - a data file: sentences read better unbroken
"""The search relevance set of this project: a corpus and graded queries (bench/search.py uses it).

Helio, a fictitious scheduling and payroll SaaS, as its project ``DEMO``
would hold it: 81 hand-written items, skills and knowledge entries
that queries are about, and 440 generated neighbours in the same
vocabulary that no query asks for. Every query grades its relevant
documents: 3 the answer, 2 a close companion, 1 related. Four families of
queries: ``keyword`` (the answer's own words), ``paraphrase`` (no word in
common with the answer, stemmed, stop words aside: :func:`shared_words`
checks it), ``identifier`` (an item key such as DEMO-12) and ``natural``
(a question in plain words that shares some).

Items take their numbers in corpus order: the hand-written items come first,
so ``{ref}`` in a query's text is replaced by that item's key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import product

from tracker.search.query import STOP_WORDS, WORD

PROJECT_KEY = "DEMO"


@dataclass(frozen=True)
class Doc:
    ref: str
    kind: str  # item, skill, knowledge
    subkind: str  # ticket, epic, milestone; document, decision, note, debt; "" for skills
    title: str
    body: str
    state: str = ""


@dataclass(frozen=True)
class Query:
    text: str  # "{ref}" stands for the key of that item
    family: str  # keyword, paraphrase, identifier, natural
    grades: dict[str, int] = field(default_factory=dict)


def _t(ref: str, title: str, body: str, state: str = "ready", subkind: str = "ticket") -> Doc:
    return Doc(ref, "item", subkind, title, body, state)


def _k(ref: str, subkind: str, title: str, body: str) -> Doc:
    return Doc(ref, "knowledge", subkind, title, body)


def _s(name: str, body: str) -> Doc:
    return Doc(name, "skill", "", name, body)


CORE: tuple[Doc, ...] = (
    # --- authentication
    _t(
        "sso-saml",
        "Single sign-on with SAML for enterprise workspaces",
        "Enterprise customers want their staff to log in through Okta or Azure AD. Implement SAML 2.0 "
        "service provider metadata, the assertion consumer endpoint and just-in-time provisioning of accounts.",
    ),
    _t(
        "pw-reset-mail",
        "Password reset email is not delivered to Outlook addresses",
        "Reset links sent to outlook.com and hotmail.com bounce with a 550 policy error. Our SPF record lacks "
        "the mail relay we added in May, and DKIM signing is off for the transactional domain.",
        "in_progress",
    ),
    _t(
        "mfa-totp",
        "Two-factor authentication with authenticator apps",
        "Let users enrol a TOTP secret by scanning a QR code, require the six-digit code at login and offer "
        "ten single-use recovery codes.",
    ),
    _t(
        "session-timeout",
        "Sessions expire after 15 minutes of inactivity on shared kiosks",
        "Kiosk accounts should be logged out automatically: keep the last activity timestamp in the session "
        "and redirect to the login page.",
        "draft",
    ),
    _t(
        "lockout",
        "Lock an account after repeated failed sign-in attempts",
        "After five wrong passwords within ten minutes block the account for fifteen minutes and email its "
        "owner. Protects against credential stuffing.",
    ),
    # --- billing
    _t(
        "billing-epic",
        "Self-serve billing portal",
        "Customers manage plans, payment methods and invoices without writing to support.",
        "open",
        "epic",
    ),
    _t(
        "invoice-pdf",
        "Attach invoices as PDF to the monthly billing email",
        "Render each invoice with the company letterhead and attach it; keep a copy in object storage.",
    ),
    _t(
        "proration",
        "Prorate charges when a team upgrades mid-cycle",
        "When a customer moves from Basic to Pro on day 12, charge only the remaining days of the period "
        "and credit the unused part.",
    ),
    _t(
        "card-update",
        "Let customers replace the credit card on file",
        "Add a form backed by Stripe Elements to swap the default payment method without cancelling the "
        "subscription.",
        "in_review",
    ),
    _t(
        "dunning",
        "Retry failed subscription payments before suspending",
        "When Stripe declines a renewal, retry on days 1, 3 and 7, send reminder emails, then suspend the "
        "workspace and keep its data for 30 days.",
    ),
    _t(
        "vat",
        "Charge VAT for EU business customers",
        "Validate VAT numbers against VIES, apply the reverse charge for valid B2B numbers and show tax lines "
        "on invoices.",
    ),
    # --- notifications
    _t(
        "digest",
        "Daily digest email instead of one email per comment",
        "Collect comments and shift changes of the day and send them together at 7 am local time.",
    ),
    _t(
        "push-mobile",
        "Push notifications on iOS and Android via Firebase",
        "Register device tokens at login and send pushes for new shifts and approved swaps.",
    ),
    _t(
        "slack-integration",
        "Post shift changes to a Slack channel",
        "Teams connect a Slack workspace with OAuth and choose the channel that receives roster updates.",
    ),
    _t(
        "notif-prefs",
        "Notification preferences per channel",
        "A settings page where each person picks email, push or Slack for every event type.",
        "draft",
    ),
    _t(
        "unsubscribe",
        "One-click unsubscribe link in marketing emails",
        "Add List-Unsubscribe headers so that Gmail and Yahoo show their unsubscribe button, as their bulk "
        "sender rules require.",
    ),
    # --- scheduling
    _t(
        "recurring-shifts",
        "Recurring shifts that repeat every week",
        "A manager defines a shift once with a weekly rule and an end date; edits apply to one or all "
        "occurrences.",
        "done",
    ),
    _t(
        "timezone-bug",
        "Shifts display one hour off after the daylight saving time change",
        "Times are stored as naive local datetimes; after the March clock change every shift moved by an hour. "
        "Store UTC and convert in the browser.",
        "in_progress",
    ),
    _t(
        "swap-shifts",
        "Employees can trade shifts with approval",
        "A staff member offers a shift, a colleague accepts it, and the change waits for approval before the "
        "roster updates.",
    ),
    _t(
        "overtime",
        "Warn managers before a schedule exceeds 40 hours per week",
        "Show a warning badge on the employee's row and block publishing unless the manager confirms.",
    ),
    _t(
        "ical-feed",
        "Calendar feed so schedules appear in Google Calendar and Outlook",
        "Serve a private iCalendar URL per user with the upcoming shifts; revoke it from the profile.",
    ),
    _t(
        "availability",
        "Staff mark the days they cannot work",
        "Employees enter unavailable dates and preferred hours; the auto-scheduler respects them.",
        "done",
    ),
    _t(
        "open-shifts",
        "Broadcast an open shift to qualified staff",
        "When someone calls in sick, the manager posts the shift and the first qualified person to accept gets "
        "it.",
        "draft",
    ),
    # --- performance
    _t(
        "slow-dashboard",
        "Dashboard takes eight seconds to load for large accounts",
        "The overview page issues a query per team member; with 2,000 members it times out. Batch the queries "
        "and cache the counts.",
        "in_progress",
    ),
    _t(
        "db-index",
        "Add an index on shifts (start_at, location_id)",
        "The week view filters by location and start time; a composite index turns the sequential scan into an "
        "index scan.",
        "done",
    ),
    _t(
        "cdn",
        "Serve static assets from a CDN with long cache headers",
        "Fingerprint file names at build time and set a one-year max-age.",
    ),
    _t(
        "memory-leak",
        "Worker memory grows until the OOM killer restarts it",
        "Celery workers grow 200 MB an hour; we suspect the PDF renderer holding fonts. Set "
        "max-tasks-per-child as a stopgap.",
        "in_progress",
    ),
    # --- data import and export
    _t(
        "csv-import",
        "Import employees from a CSV spreadsheet",
        "Map columns to name, email, role and hourly rate; show a preview with row errors before saving.",
    ),
    _t(
        "gdpr-export",
        "Export all personal data of a user on request",
        "Under GDPR article 15 a person may request a copy of their data: produce a ZIP of JSON files within "
        "30 days.",
    ),
    _t(
        "account-deletion",
        "Delete a user's personal data when they close their account",
        "Right to erasure: anonymise names and emails in shifts and audit logs, purge backups after 35 days.",
    ),
    _t(
        "payroll-export",
        "Export worked hours to payroll providers",
        "Generate files for ADP and Gusto with the hours of each employee per pay period.",
    ),
    # --- infrastructure
    _t(
        "k8s-migration",
        "Move hosting from Heroku to Kubernetes",
        "Containerise the web and worker processes, run them on a managed cluster, and retire the Heroku "
        "dynos.",
        "open",
        "epic",
    ),
    _t(
        "tls-cert",
        "Renew the wildcard TLS certificate before it expires",
        "The *.helio.app certificate expires on 14 June; automate renewal with cert-manager and Let's Encrypt.",
    ),
    _t(
        "alerting",
        "Page the on-call engineer when the error rate exceeds 2 percent",
        "Alert through PagerDuty on five minutes of elevated 5xx responses; link the dashboard in the alert.",
    ),
    _t(
        "postgres-upgrade",
        "Upgrade PostgreSQL from 13 to 16",
        "Rehearse pg_upgrade on a copy, measure the downtime, then upgrade during the Sunday window.",
        "draft",
    ),
    # --- mobile
    _t(
        "offline-mode",
        "Mobile app works without a network connection",
        "Cache the week's schedule on the device and queue clock-in events until the phone is back online.",
    ),
    _t(
        "clock-in-geofence",
        "Clock in only within 200 metres of the workplace",
        "Use the phone's GPS location; managers set the allowed radius per site.",
    ),
    _t(
        "app-crash",
        "Android app crashes when the camera permission is denied",
        "Scanning a badge without camera access throws a SecurityException; ask again or fall back to manual "
        "entry.",
        "in_review",
    ),
    _t(
        "dark-mode",
        "Dark theme for the mobile app",
        "Follow the operating system's appearance setting and let people override it.",
        "draft",
    ),
    # --- accessibility and languages
    _t(
        "screen-reader",
        "Schedule grid is unusable with screen readers",
        "VoiceOver announces nothing for the shift cells; add ARIA roles, labels and keyboard navigation.",
    ),
    _t(
        "contrast",
        "Raise the colour contrast of muted text to WCAG AA",
        "Grey helper text has a 3:1 ratio; WCAG AA needs 4.5:1 for body text.",
        "done",
    ),
    _t(
        "german-translation",
        "Translate the web app into German",
        "Extract strings with gettext, send them to the translators and add a language switcher.",
    ),
    _t(
        "rtl",
        "Support right-to-left layouts for Arabic and Hebrew",
        "Mirror the layout with logical CSS properties and test the schedule grid in both directions.",
        "draft",
    ),
    _t(
        "date-formats",
        "Show dates in the user's locale format",
        "Use the browser's Intl API: 03/04 means March in the US and April in Germany.",
    ),
    # --- teams and permissions
    _t(
        "roles-custom",
        "Custom roles with fine-grained permissions",
        "Administrators compose roles from permissions such as publish schedule or approve swaps.",
    ),
    _t(
        "audit-log",
        "Audit log of administrative actions",
        "Record who changed roles, billing or settings and when; searchable and exportable for compliance "
        "reviews.",
    ),
    _t(
        "invite-flow",
        "Invite teammates by email with an expiring link",
        "Invitations expire after seven days; admins can resend or revoke them.",
        "done",
    ),
    _t(
        "multi-location",
        "Organizations with several locations",
        "One account runs many sites, each with its own schedule, managers and opening hours.",
        "open",
        "epic",
    ),
    _t(
        "manager-scope",
        "Managers see only the teams they lead",
        "Scope every roster query by the manager's teams; administrators keep the full view.",
    ),
    # --- API and integrations
    _t(
        "webhooks",
        "Outgoing webhooks when a shift changes",
        "POST a signed JSON payload to customer URLs; sign with HMAC-SHA256 and retry with exponential backoff.",
    ),
    _t(
        "rate-limit",
        "Rate limit the public REST API",
        "Return HTTP 429 with Retry-After above 600 requests per minute per token.",
    ),
    _t(
        "api-keys",
        "Personal API tokens with scopes",
        "Tokens are shown once, stored hashed, limited to read or write scopes, and expire after a year.",
    ),
    _t(
        "openapi",
        "Publish the OpenAPI specification and generated SDKs",
        "Generate the schema from the views and publish TypeScript and Python clients on every release.",
    ),
    _t(
        "zapier",
        "Zapier app with triggers for new shifts",
        "Offer triggers for new and changed shifts and an action that creates a shift.",
        "draft",
    ),
    # --- onboarding and growth
    _t(
        "onboarding-tour",
        "Guided product tour for first-time managers",
        "Walk a new manager through creating a location, inviting staff and publishing a first schedule.",
    ),
    _t(
        "trial-extension",
        "Extend the free trial from 14 to 30 days for teams over 50",
        "Large teams need longer to evaluate; extend automatically when the 51st employee is added.",
    ),
    _t(
        "templates",
        "Schedule templates for restaurants, retail and clinics",
        "Start from a template with typical shifts and roles for the trade instead of a blank week.",
    ),
    _t(
        "referral",
        "Referral program with one free month",
        "Both the referrer and the new customer get a month free after the first paid invoice.",
        "draft",
    ),
    # --- quality
    _t(
        "flaky-e2e",
        "Flaky end-to-end test for shift swapping",
        "test_swap_approval fails one run in ten on CI because the approval email arrives after the assertion.",
    ),
    _t(
        "coverage",
        "Raise unit test coverage of the billing module to 80 percent",
        "Cover proration, tax rounding and refunds; fail CI when coverage drops.",
    ),
    _t(
        "load-test",
        "Load test the schedule publishing endpoint with 10,000 shifts",
        "Use k6 against staging and record p95 latency and database CPU.",
    ),
    _t(
        "beta-milestone",
        "Public beta",
        "Everything a first paying customer needs: billing, schedules, mobile app.",
        "open",
        "milestone",
    ),
    # --- skills
    _s(
        "code-review",
        "How we review pull requests: one approval from a code owner, tests for every bug fix, no merge on a "
        "red CI, squash commits with a conventional message.",
    ),
    _s(
        "incident-response",
        "When production breaks: declare an incident in #incidents, name a commander, post status updates "
        "every 30 minutes and write a postmortem within five days.",
    ),
    _s(
        "ticket-writing",
        "Write tickets with a user story, acceptance criteria as a checklist, a link to the design and an "
        "estimate in points.",
    ),
    _s(
        "mobile-release",
        "Publishing the apps: bump build numbers, run fastlane, submit to the App Store and Google Play for "
        "review, then a staged rollout from 10 to 100 percent.",
    ),
    _s(
        "database-migrations",
        "Schema changes stay backwards compatible: add nullable columns first, backfill in batches, create "
        "indexes concurrently, drop old columns one release later.",
    ),
    _s(
        "security-review",
        "Before merging an endpoint check authentication, authorization of every object, input validation, "
        "secrets kept out of the code and dependency advisories.",
    ),
    # --- knowledge
    _k(
        "auth-decision",
        "decision",
        "Short-lived JWT access tokens with rotating refresh tokens",
        "Access tokens live 10 minutes; refresh tokens rotate on every use, and a reused refresh token revokes "
        "its whole family.",
    ),
    _k(
        "redis-decision",
        "decision",
        "Redis for caching and as the Celery broker",
        "Redis serves both the page cache and the task queue; RabbitMQ was considered, but one service is "
        "simpler to operate.",
    ),
    _k(
        "frontend-decision",
        "decision",
        "Build the web front end with React and TypeScript",
        "Typed components and one language across the team; server-rendered pages stay where they are.",
    ),
    _k(
        "feature-flags",
        "decision",
        "Roll out features behind flags with LaunchDarkly",
        "Every risky change ships dark; flags are removed within two sprints after the full rollout.",
    ),
    _k(
        "deploy-runbook",
        "document",
        "How we deploy to production",
        "Merge to main, CI builds the image and Argo CD syncs the staging cluster; promote to production by "
        "tagging a release. Roll back by tagging the previous image again.",
    ),
    _k(
        "backup-restore",
        "document",
        "Runbook: restoring the database from a backup",
        "Pick the snapshot, restore it into a new instance, replay the WAL to the wanted time and switch the "
        "connection string.",
    ),
    _k(
        "pricing-doc",
        "document",
        "Pricing plans: Basic, Pro and Enterprise",
        "Basic is free up to 10 staff; Pro costs 4 euros per user per month; Enterprise adds SSO, the audit log "
        "and a dedicated account manager.",
    ),
    _k(
        "data-retention",
        "document",
        "Data retention policy",
        "Audit logs are kept for two years, deleted workspaces for 30 days and backups for 35 days.",
    ),
    _k(
        "incident-postmortem",
        "note",
        "Postmortem: 40-minute outage on 3 March",
        "A migration locked the shifts table at peak hours. Lessons: run long migrations concurrently, set a "
        "lock timeout, announce maintenance.",
    ),
    _k(
        "retention-note",
        "note",
        "Customer interviews: restaurant chains",
        "Managers struggle with last-minute sick calls and want to broadcast an open shift to qualified staff.",
    ),
    _k(
        "billing-debt",
        "debt",
        "Currency amounts stored as floats",
        "Prices are kept in float columns and rounding errors show in totals. Migrate to integer cents.",
    ),
    _k(
        "n-plus-one",
        "debt",
        "N+1 queries in the roster API",
        "The roster endpoint loads each employee's shifts in its own query; prefetch them.",
    ),
    _k(
        "legacy-jquery",
        "debt",
        "Legacy jQuery code in the settings pages",
        "Four settings pages still use jQuery plugins; port them to React components.",
    ),
)

# --- generated neighbours: the same vocabulary, asked about by no query

_ACTIONS = (
    ("Refactor", "Split the module into smaller functions and remove duplicated helpers."),
    ("Add unit tests for", "Cover the happy path and the two known edge cases."),
    ("Document", "Write a short README section on configuration and failure modes."),
    ("Clean up logging in", "Drop debug lines, add request ids and use structured fields."),
    ("Upgrade the dependencies of", "Bump minor versions and read the changelogs for breaking changes."),
    ("Add metrics to", "Export counters and a latency histogram to Prometheus."),
    ("Profile", "Record a flame graph under production-like load and list the hot spots."),
    ("Remove dead code from", "Delete functions that nothing calls since the last redesign."),
    ("Add a feature flag to", "Guard the new behaviour so it can be switched off per workspace."),
    ("Review error messages of", "Make every message say what happened and what to do next."),
    ("Rename settings of", "Use one naming scheme for environment variables."),
    ("Add type hints to", "Annotate public functions and run mypy in strict mode."),
    ("Move configuration of", "Read values from the environment instead of constants."),
    ("Add tracing spans to", "Propagate the trace context across the queue boundary."),
    ("Reduce the image size of", "Use a slim base image and drop build tools from the final stage."),
)
_COMPONENTS = (
    "the billing service",
    "the notification worker",
    "the admin dashboard",
    "the shift editor",
    "the public API",
    "the search indexer",
    "the export job",
    "the onboarding wizard",
    "the audit log writer",
    "the file uploader",
    "the calendar sync",
    "the reporting module",
    "the permissions layer",
    "the webhook dispatcher",
    "the session store",
    "the timesheet module",
    "the payroll connector",
    "the mobile API gateway",
    "the email templates",
    "the location settings",
    "the roster view",
    "the invoice renderer",
)
_STATES = ("draft", "ready", "in_progress", "in_review", "done", "cancelled")
_TOPICS = (
    "hiring plans",
    "the Q3 roadmap",
    "support ticket volume",
    "conference travel",
    "office move",
    "design system tokens",
    "quarterly goals",
    "vendor contracts",
    "team rituals",
    "documentation debt",
)
_SKILL_TOPICS = (
    ("python-style", "Python style: ruff defaults, type hints on public functions, no bare except."),
    ("commit-messages", "Commit messages: imperative mood, 72 characters, reference the ticket key."),
    ("branch-naming", "Branch names: kind/short-description, lowercase with dashes."),
    ("frontend-style", "Front-end style: functional components, hooks, CSS modules, no inline styles."),
    ("sql-style", "SQL style: uppercase keywords, one clause per line, explicit join conditions."),
    ("api-design", "API design: plural nouns, cursor pagination, errors as JSON with a code and a message."),
    ("logging-guide", "Logging: structured fields, no personal data, one line per event."),
    ("estimation", "Estimation: points for complexity, split anything above eight points."),
    ("pairing", "Pairing: swap the keyboard every 25 minutes and write down decisions."),
    ("on-call-handover", "On-call handover: list open alerts, running incidents and planned maintenance."),
)


@dataclass(frozen=True)
class Fillers:
    """The neighbours of a set: a ticket per action and component, meeting notes, skills."""

    actions: tuple[tuple[str, str], ...]  # (action, the sentence that details it)
    components: tuple[str, ...]
    states: tuple[str, ...]
    topics: tuple[str, ...]
    skills: tuple[tuple[str, str], ...]
    notes: int
    note: Callable[[int, str, str], tuple[str, str]]  # (number, topic, other topic) -> (title, body)

    def docs(self) -> list[Doc]:
        docs: list[Doc] = []
        for n, ((action, detail), component) in enumerate(product(self.actions, self.components)):
            title = f"{action} {component}"
            docs.append(_t(f"filler-{n}", title, f"{title}. {detail}", self.states[n % len(self.states)]))
        for n in range(1, self.notes + 1):
            topic, other = self.topics[n % len(self.topics)], self.topics[(n * 3) % len(self.topics)]
            docs.append(_k(f"note-{n}", "note", *self.note(n, topic, other)))
        return docs + [_s(name, body) for name, body in self.skills]


def numbered(docs: list[Doc], project_key: str) -> dict[str, str]:
    """Each item's key by ref: items take their numbers in the order of ``docs``."""
    items = [doc.ref for doc in docs if doc.kind == "item"]
    return {ref: f"{project_key}-{n}" for n, ref in enumerate(items, start=1)}


FILLERS = Fillers(
    _ACTIONS,
    _COMPONENTS,
    _STATES,
    _TOPICS,
    _SKILL_TOPICS,
    100,
    lambda n, topic, other: (
        f"Weekly sync {n}: {topic}",
        f"Discussed {topic} and {other}. Owners noted action items for next week.",
    ),
)


def corpus() -> list[Doc]:
    """Every document, hand-written ones first (their items are numbered 1, 2, ...)."""
    return [*CORE, *FILLERS.docs()]


def item_keys() -> dict[str, str]:
    """Each item's key by ref, in the numbering :func:`corpus` implies."""
    return numbered(corpus(), PROJECT_KEY)


def _q(text: str, family: str, **grades: int) -> Query:
    return Query(text, family, {ref.replace("_", "-"): grade for ref, grade in grades.items()})


QUERIES: tuple[Query, ...] = (
    # paraphrases: no word in common with the answer
    _q(
        "forgotten login secret recovery messages vanish for Microsoft inbox users",
        "paraphrase",
        pw_reset_mail=3,
    ),
    _q("employees enter via the corporate identity system", "paraphrase", sso_saml=3, auth_decision=1),
    _q("extra verification step using a one-time number generator", "paraphrase", mfa_totp=3),
    _q("bill partially when a company switches tier in the middle of the month", "paraphrase", proration=3),
    _q("update how a client pays us each period", "paraphrase", card_update=3, billing_epic=1),
    _q("rota entries are sixty minutes wrong since summertime began", "paraphrase", timezone_bug=3),
    _q("workers exchange rota slots once a supervisor agrees", "paraphrase", swap_shifts=3, flaky_e2e=1),
    _q("landing screen crawls for enormous tenants", "paraphrase", slow_dashboard=3, n_plus_one=1),
    _q("background queue processes hog ever more RAM", "paraphrase", memory_leak=3),
    _q("hand someone an archive of the information we hold on them", "paraphrase", gdpr_export=3),
    _q("forget a person entirely once they leave the service", "paraphrase", account_deletion=3),
    _q("handset software usable underground lacking reception", "paraphrase", offline_mode=3),
    _q("permit attendance stamps only near the shop premises", "paraphrase", clock_in_geofence=3),
    _q("blind people cannot navigate the rota table", "paraphrase", screen_reader=3, contrast=1),
    _q("let outside systems hear about rota edits over HTTP callbacks", "paraphrase", webhooks=3, zapier=1),
    _q("stop clients from hammering our endpoints", "paraphrase", rate_limit=3),
    _q("what to do when the site goes down", "paraphrase", incident_response=3, alerting=1),
    _q("what gatekeepers look at before accepting a contributor's patch", "paraphrase", code_review=3),
    _q("how expensive is the premium subscription tier", "paraphrase", pricing_doc=3),
    _q("downtime caused by a blocking schema alteration", "paraphrase", incident_postmortem=3),
    _q("which in-memory store backs our background jobs", "paraphrase", redis_decision=3),
    _q("faint captions are hard to read for people with low vision", "paraphrase", contrast=3),
    _q("put my rota into the agenda on my phone", "paraphrase", ical_feed=3),
    _q("alert supervisors about excessive workload in a seven-day span", "paraphrase", overtime=3),
    _q("monetary values suffer from imprecise decimal representation", "paraphrase", billing_debt=3),
    _q("brute-force guessing of people's logins", "paraphrase", lockout=3, mfa_totp=1),
    # keywords: the answer's own words
    _q("SAML single sign-on", "keyword", sso_saml=3, pricing_doc=1),
    _q("VAT reverse charge", "keyword", vat=3),
    _q("daily digest email", "keyword", digest=3, notif_prefs=1),
    _q("Slack channel", "keyword", slack_integration=3, notif_prefs=1),
    _q("recurring weekly shifts", "keyword", recurring_shifts=3, templates=1),
    _q("import employees from CSV", "keyword", csv_import=3),
    _q("payroll export ADP Gusto", "keyword", payroll_export=3),
    _q("TLS certificate renewal", "keyword", tls_cert=3),
    _q("upgrade PostgreSQL", "keyword", postgres_upgrade=3, database_migrations=1),
    _q("Heroku to Kubernetes", "keyword", k8s_migration=3, deploy_runbook=1),
    _q("Android camera permission crash", "keyword", app_crash=3),
    _q("German translation", "keyword", german_translation=3, date_formats=1),
    _q("right-to-left Arabic Hebrew", "keyword", rtl=3),
    _q("audit log compliance", "keyword", audit_log=3, data_retention=1, pricing_doc=1),
    _q("personal API tokens scopes", "keyword", api_keys=3, rate_limit=1),
    _q("OpenAPI SDK", "keyword", openapi=3),
    _q("free trial 30 days", "keyword", trial_extension=3),
    _q("flaky end-to-end test", "keyword", flaky_e2e=3),
    _q("unit test coverage billing", "keyword", coverage=3),
    _q("load test schedule publishing", "keyword", load_test=3),
    _q("N+1 queries roster", "keyword", n_plus_one=3, slow_dashboard=1),
    _q("index on shifts start_at location_id", "keyword", db_index=3),
    _q("React TypeScript front end", "keyword", frontend_decision=3, legacy_jquery=1),
    _q("LaunchDarkly feature flags", "keyword", feature_flags=3),
    _q("restore database backup runbook", "keyword", backup_restore=3, data_retention=1),
    _q("retry failed subscription payments", "keyword", dunning=3, card_update=1),
    _q("List-Unsubscribe Gmail bulk sender", "keyword", unsubscribe=3),
    _q("on-call error rate PagerDuty", "keyword", alerting=3, incident_response=1),
    # identifiers
    _q("{sso-saml}", "identifier", sso_saml=3),
    _q("{vat}", "identifier", vat=3),
    _q("status of {timezone-bug}", "identifier", timezone_bug=3),
    _q("{webhooks}", "identifier", webhooks=3),
    _q("is {memory-leak} fixed", "identifier", memory_leak=3),
    _q("what blocks {k8s-migration}?", "identifier", k8s_migration=3),
    _q("{load-test}", "identifier", load_test=3),
    _q("{gdpr-export} and {account-deletion}", "identifier", gdpr_export=3, account_deletion=3),
    _q("{offline-mode}", "identifier", offline_mode=3),
    _q("who works on {audit-log}", "identifier", audit_log=3),
    # natural questions that share some words
    _q("how do we roll back a bad release", "natural", deploy_runbook=3, feature_flags=1, mobile_release=1),
    _q("what happens when a customer's card is declined", "natural", dunning=3, card_update=2),
    _q("staff calls in sick at the last minute", "natural", open_shifts=3, retention_note=2),
    _q("steps to get the iPhone app into the App Store", "natural", mobile_release=3),
    _q(
        "changing the database schema without downtime",
        "natural",
        database_migrations=3,
        incident_postmortem=2,
    ),
    _q("how long do we keep deleted workspaces", "natural", data_retention=3, account_deletion=1),
    _q("tell the team in chat when the roster changes", "natural", slack_integration=3, webhooks=1),
    _q("what does the enterprise plan include", "natural", pricing_doc=3, sso_saml=1),
    _q("how should a good ticket be written", "natural", ticket_writing=3),
    _q("security checklist before merging an endpoint", "natural", security_review=3, code_review=1),
    _q("invite colleagues to the workspace", "natural", invite_flow=3, onboarding_tour=1),
    _q("managers should only see their own team", "natural", manager_scope=3, roles_custom=1),
    _q("one company with shops in several cities", "natural", multi_location=3),
    _q("help new customers publish their first schedule quickly", "natural", onboarding_tour=3, templates=2),
    _q("how long do access tokens live", "natural", auth_decision=3, api_keys=1),
    _q("what restaurant managers told us", "natural", retention_note=3, open_shifts=2),
    _q("old jQuery code", "natural", legacy_jquery=3),
    _q("give a free month for bringing a friend", "natural", referral=3),
    _q("Zapier integration", "natural", zapier=3),
    _q("days employees are unavailable", "natural", availability=3),
)

_SUFFIXES = ("ing", "ed", "es", "s", "ly")
_PLACEHOLDER = re.compile(r"\{([a-z0-9-]+)\}")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    return {_stem(w) for w in WORD.findall(text.lower()) if w not in STOP_WORDS}


def shared_words(query: Query, doc: Doc) -> set[str]:
    """The stemmed words a query has in common with a document's title and body."""
    return stems(query.text) & stems(f"{doc.title} {doc.body}")


def query_text(query: Query, keys: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: keys[m[1]], query.text)
