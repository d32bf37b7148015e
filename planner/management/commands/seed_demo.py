"""``manage.py seed_demo``: the demo organization, project DEMO, its users and its content.

Idempotent. Users, the organization, the project and the memberships are
found or created; the content (plan, knowledge, planner skill, a proposed
changeset) is written through the services, as the demo owner, only while the
project has no items, so a second run changes nothing. A created user gets a
generated password, printed once; ``--reset-passwords`` prints new ones and
``--password`` sets a given one for both users. The worker ``agent``, a member,
has no password but an API key bound to DEMO with the scopes read, ask and work (printed when
created; ``--reset-passwords`` revokes it and prints a new one), one open
question, waiting for a human (``planner/domain/services/demo.py``), a ticket it carried to done with
its reports, one it reported done that waits in review with its comment mentioning ``demo``, and a
ticket it holds a claim on, with a progress report. A second project, WEB, has an invitation
waiting for ``viewer``. Users get e-mail addresses (``demo@example.com``, …).
DEMO has a linked Git repository, ``courtside``: a small local one made under
``settings.DEMO_REPOSITORY_ROOT`` (``tracker/management/demo_repository.py``; kept once made),
linked by path and fetched at once. The seed, an operator's command, lets that one folder be
linked whatever ``[repositories] local_roots`` says; an owner over REST or a page cannot.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from knowledge.models import KnowledgeEntry
from knowledge.services import knowledge_create, knowledge_update
from planner.domain.selectors import project_provider
from planner.domain.services.demo import demo_question_ensure
from planner.models import Question, QuestionStatus
from tracker.errors import BalletError
from tracker.management import demo_content as content
from tracker.management import demo_repository
from tracker.models import (
    Agent,
    ChangesetStatus,
    Claim,
    Dependency,
    Invitation,
    Item,
    Membership,
    Organization,
    Project,
    ReportKind,
    Repository,
    Role,
    Scope,
)
from tracker.selectors import changeset_list, claim_list, key_list, runnable_tickets, skill_effective_list
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.comments import comment_add
from tracker.services.items import dependency_add, item_create, item_update
from tracker.services.keys import key_create, key_revoke
from tracker.services.members import invitation_create
from tracker.services.projects import membership_set, project_update
from tracker.services.repositories import repository_fetch, repository_link
from tracker.services.skills import skill_version_create
from tracker.services.work import claim_take, report_add


@dataclass(frozen=True)
class DemoUser:
    username: str
    role: str
    is_staff: bool


OWNER = DemoUser(username="demo", role=Role.OWNER, is_staff=True)
VIEWER = DemoUser(username="viewer", role=Role.VIEWER, is_staff=False)
AGENT = DemoUser(username="agent", role=Role.MEMBER, is_staff=False)
AGENT_KEY = "demo agent"
AGENT_SCOPES = (Scope.READ, Scope.ASK, Scope.WORK)
DEMO_LEASE = timedelta(days=7)
FETCH_POLL = 0.1  # seconds between looks at a fetch another process runs


class Command(BaseCommand):
    help = (
        "Build the demo organization, project DEMO, the users demo (owner) and viewer, and the worker "
        "agent (a member with an API key) with an open question. Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", help="Set this password for both demo users.")
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="Give existing demo users new generated passwords, and print them.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        password: str | None = options["password"]
        if password is not None and not password.strip():
            raise CommandError("--password must not be empty.")
        try:
            with transaction.atomic():
                lines = [
                    _user_ensure(u, password=password, reset=options["reset_passwords"])
                    for u in (OWNER, VIEWER)
                ]
                owner = User.objects.get(username=OWNER.username)
                project = _project_ensure(owner)
                built = not project.items.exists()
                if built:
                    _content_build(Actor(user=owner), project)
                lines.append(_agent_ensure(owner, project, reset=options["reset_passwords"]))
                if built:
                    _work_build(owner, User.objects.get(username=AGENT.username), project)
                    _invitation_build(owner, project)
            lines.append(_repository_ensure(owner, project))
        except BalletError as exc:
            raise CommandError(f"Cannot seed the demo: {exc.message}") from exc
        self.stdout.write("\n".join(lines))
        state = "Built" if built else "Already seeded, nothing changed:"
        self.stdout.write(self.style.SUCCESS(f"{state} {_summary(project)}"))
        self.stdout.write(_planner_line(project))


def _repository_ensure(owner: User, project: Project) -> str:
    """The demo's Git repository: made if missing, linked to the project if it is not, and
    fetched when its mirror has no commit yet; the line to print about it."""
    root = Path(settings.DEMO_REPOSITORY_ROOT)
    try:
        path, made = demo_repository.demo_repository_ensure(root)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CommandError(f"Cannot make the demo repository under {root}: {exc}") from exc
    repo = Repository.objects.filter(project=project, name=demo_repository.NAME).first()
    if repo is None:
        repo = repository_link(
            actor=Actor(user=owner),
            project=project,
            name=demo_repository.NAME,
            local_path=str(path),
            default_branch=demo_repository.BRANCH,
            extra_roots=(str(root),),  # this folder alone, for the operator's seed
        )
    if not repo.last_commit:
        repo = repository_fetch(repo.pk) or _fetched_elsewhere(repo)
    state = "made" if made else "kept"
    fetched = f"mirror at {repo.last_commit[:12]}" if repo.last_commit else f"not fetched: {repo.last_error}"
    return f"repository {repo.name} ({state} at {path}): {fetched}"


def _fetched_elsewhere(repo: Repository) -> Repository:
    """The repository once the fetch that another process (a worker, the embedded server's loop,
    woken by the link) has on its way ends; as it stands if it outlasts git's timeout."""
    deadline = time.monotonic() + settings.BALLET_REPOSITORIES.timeout_seconds
    repo.refresh_from_db()
    while repo.fetching_since is not None and time.monotonic() < deadline:
        time.sleep(FETCH_POLL)
        repo.refresh_from_db()
    return repo


def _planner_line(project: Project) -> str:
    """Who answers DEMO's chats, and where a credential is set (docs/architecture.md#the-demo-planner)."""
    if project_provider(project) == "anthropic":
        return f"{project.key}'s planner: Claude."
    return (
        f"{project.key}'s planner: the demo planner (scripted, no AI model), since no credential is set. "
        "For Claude, set ANTHROPIC_API_KEY, or the project's credential at "
        f"/projects/{project.key}/settings/."
    )


def _user_ensure(spec: DemoUser, *, password: str | None, reset: bool) -> str:
    """Find or create the user; return the line to print about its password."""
    user, created = User.objects.get_or_create(
        username=spec.username,
        defaults={"is_staff": spec.is_staff, "email": f"{spec.username}@example.com"},
    )
    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
        return f"{spec.username} ({spec.role}): password set from --password"
    if created or reset:
        generated = secrets.token_urlsafe(12)
        user.set_password(generated)
        user.save(update_fields=["password"])
        return f"{spec.username} ({spec.role}): {'created' if created else 'new'} password: {generated}"
    return f"{spec.username} ({spec.role}): exists, password unchanged (--reset-passwords prints a new one)"


def _agent_ensure(owner: User, project: Project, *, reset: bool) -> str:
    """The worker ``agent``: a member of the project with an API key and one open question; the
    line to print about its key."""
    agent, created = User.objects.get_or_create(
        username=AGENT.username, defaults={"email": f"{AGENT.username}@example.com"}
    )
    if created:
        agent.set_unusable_password()  # a worker signs in with its API key only
        agent.save(update_fields=["password"])
    if not Membership.objects.filter(project=project, user=agent).exists():
        membership_set(  # the demo's own user: join at once (tracker.services.members)
            actor=Actor(user=owner), project=project, username=AGENT.username, role=AGENT.role, join=True
        )
    Agent.objects.get_or_create(user=agent, defaults={"project": project, "created_by": owner})
    demo_question_ensure(agent=agent, project=project)
    return _agent_key_ensure(agent, project, reset=reset)


def _agent_key_ensure(agent: User, project: Project, *, reset: bool) -> str:
    """The agent's active key named AGENT_KEY, made (and printed, the only time it can be) when it
    has none; ``reset`` revokes it first."""
    who = f"{AGENT.username} ({AGENT.role}, a worker)"
    keys = key_list(user=agent).filter(name=AGENT_KEY, revoked_at__isnull=True)
    if reset:
        for key in keys:
            key_revoke(key=key)
    elif any(key.status == "active" for key in keys):
        return f"{who}: exists, API key unchanged (--reset-passwords prints a new one)"
    _, secret = key_create(user=agent, name=AGENT_KEY, scopes=AGENT_SCOPES, projects=[project])
    scopes = "+".join(AGENT_SCOPES)
    return f"{who}: {'new ' if reset else ''}API key ({scopes}): {secret}"


def _project_ensure(owner: User) -> Project:
    """The organization, the project and both memberships, each created only if missing."""
    organization, _ = Organization.objects.get_or_create(
        slug=content.ORGANIZATION_SLUG, defaults={"name": content.ORGANIZATION_NAME}
    )
    project, _ = Project.objects.select_related("organization").get_or_create(
        key=content.PROJECT_KEY,
        defaults={
            "organization": organization,
            "name": content.PROJECT_NAME,
            "description": content.PROJECT_DESCRIPTION,
        },
    )
    if not Membership.objects.filter(project=project, user=owner).exists():
        # The first owner cannot be granted through membership_set: nobody holds project.admin yet.
        Membership.objects.create(project=project, user=owner, role=OWNER.role)
    if not Membership.objects.filter(project=project, user__username=VIEWER.username).exists():
        membership_set(  # the demo's own user: join at once (tracker.services.members)
            actor=Actor(user=owner), project=project, username=VIEWER.username, role=VIEWER.role, join=True
        )
    return project


def _content_build(actor: Actor, project: Project) -> None:
    items = _plan_build(actor, project)
    _knowledge_build(actor, project, items)
    _skill_build(actor, project)
    _changeset_build(actor, project, items)


def _plan_build(actor: Actor, project: Project) -> dict[str, Item]:
    """Create every item with its dependencies, then walk each through its state history."""
    specs = (*content.MILESTONES, *content.EPICS, *content.TICKETS)
    items: dict[str, Item] = {}
    for spec in specs:
        items[spec.ref] = _item_create(actor, project, spec, items)
        for blocker in spec.blockers:
            dependency_add(actor=actor, blocker=items[blocker], blocked=items[spec.ref])
    for spec in specs:
        for state in spec.states[1:]:
            item = items[spec.ref]
            items[spec.ref] = item_update(
                actor=actor, item=item, fields={"state": state}, base_version=item.version
            )
    return items


def _item_create(actor: Actor, project: Project, spec: content.ItemSpec, items: dict[str, Item]) -> Item:
    fields: dict[str, Any] = {
        "title": spec.title,
        "description": spec.description,
        "acceptance_criteria": list(spec.criteria),
        "state": spec.states[0],
    }
    if spec.epic:
        fields["epic"] = items[spec.epic]
    if spec.milestone:
        fields["milestone"] = items[spec.milestone]
    return item_create(actor=actor, project=project, kind=spec.kind, fields=fields)


def _knowledge_build(actor: Actor, project: Project, items: dict[str, Item]) -> None:
    for spec in content.KNOWLEDGE:
        entry = knowledge_create(
            actor=actor,
            kind=spec.kind,
            title=spec.title,
            body=spec.body,
            projects=[project],
            items=[items[ref] for ref in spec.items],
        )
        if spec.revised_body is not None:
            knowledge_update(
                actor=actor, entry=entry, version=entry.version, fields={"body": spec.revised_body}
            )


def _skill_build(actor: Actor, project: Project) -> None:
    """Two versions of the project's planner skill, and the project set to use it."""
    for body in (content.SKILL_V1, content.SKILL_V2):
        skill_version_create(actor=actor, project=project, name=content.SKILL_NAME, body=body)
    settings = dict(project.settings) if isinstance(project.settings, dict) else {}
    project_update(actor=actor, project=project, settings={**settings, "skill": content.SKILL_NAME})


def _work_build(owner: User, agent: User, project: Project) -> None:
    """The agent's work: it claimed "courts", reported progress and then done with a link, and the
    owner accepted it; it reported "reset" done, which waits in review for the owner to accept it
    from its page; it claimed "grid" after them and reported progress. Its lease on "grid" runs a
    week, so that the demo shows the claim (a real worker renews it as it reports)."""
    courts, reset, grid = (_by_title(project, spec.title) for spec in _tickets("courts", "reset", "grid"))
    worker = Actor(user=agent)
    claim = claim_take(actor=worker, project=project, item=courts)
    report_add(actor=worker, claim=claim, kind=ReportKind.PROGRESS, summary=content.COURTS_PROGRESS)
    report_add(
        actor=worker,
        claim=claim,
        kind=ReportKind.DONE,
        summary=content.COURTS_DONE,
        links=list(content.COURTS_LINKS),
    )
    courts.refresh_from_db()
    item_update(actor=Actor(user=owner), item=courts, fields={"state": "done"}, base_version=courts.version)
    claim = claim_take(actor=worker, project=project, item=reset)
    report_add(
        actor=worker,
        claim=claim,
        kind=ReportKind.DONE,
        summary=content.RESET_DONE,
        links=list(content.RESET_LINKS),
    )
    comment_add(actor=worker, item=reset, body=content.RESET_COMMENT)
    claim = claim_take(actor=worker, project=project, item=grid)
    report_add(actor=worker, claim=claim, kind=ReportKind.PROGRESS, summary=content.GRID_PROGRESS)
    Claim.objects.filter(pk=claim.pk).update(expires_at=timezone.now() + DEMO_LEASE)


def _invitation_build(owner: User, project: Project) -> None:
    """The organization's second project, owned by ``demo``, with an invitation waiting for ``viewer``
    in their inbox (nobody joins a project without accepting); none if the key is taken."""
    if Project.objects.filter(key=content.WEBSITE_KEY).exists():
        return
    website = Project.objects.create(
        organization=project.organization,
        key=content.WEBSITE_KEY,
        name=content.WEBSITE_NAME,
        description=content.WEBSITE_DESCRIPTION,
    )
    Membership.objects.create(project=website, user=owner, role=OWNER.role)  # its first owner
    invitation_create(actor=Actor(user=owner), project=website, username=VIEWER.username, role=Role.MEMBER)


def _tickets(*refs: str) -> list[content.ItemSpec]:
    specs = {spec.ref: spec for spec in content.TICKETS}
    return [specs[ref] for ref in refs]


def _by_title(project: Project, title: str) -> Item:
    return Item.objects.select_related("project").get(project=project, title=title)


def _changeset_build(actor: Actor, project: Project, items: dict[str, Item]) -> None:
    """One proposed changeset waiting for review: a create, an update and a dependency."""
    cancel = items["cancel"]
    waitlist = {**content.WAITLIST_TICKET, "epic": items["booking"].key, "milestone": items["launch"].key}
    operations = [
        {"op": "create", "ref": "waitlist", "kind": "ticket", "fields": waitlist},
        {
            "op": "update",
            "item": cancel.key,
            "base_version": cancel.version,
            "fields": {
                "state": "ready",
                "acceptance_criteria": [*cancel.acceptance_criteria, content.CANCEL_EXTRA_CRITERION],
            },
        },
        {"op": "add_dependency", "blocker": items["book"].key, "blocked": "$waitlist"},
    ]
    changeset_propose(
        actor=actor,
        project=project,
        title=content.CHANGESET_TITLE,
        rationale=content.CHANGESET_RATIONALE,
        operations=operations,
    )


def _summary(project: Project) -> str:
    kinds = Counter(Item.objects.filter(project=project).values_list("kind", flat=True))
    dependencies = Dependency.objects.filter(blocked__project=project).count()
    runnable = ", ".join(item.key for item in runnable_tickets(project=project)) or "none"
    entries = KnowledgeEntry.objects.filter(projects=project).count()
    skills = ", ".join(f"{s.name} v{s.version.version}" for s in skill_effective_list(project=project))
    proposed = changeset_list(project=project, status=ChangesetStatus.PROPOSED).count()
    waiting = Question.objects.filter(project=project, status=QuestionStatus.OPEN).count()
    claims = claim_list(project=project, active=True).select_related("item__project", "holder")
    claimed = ", ".join(f"{c.item.key} by {c.holder.get_username()}" for c in claims) or "none"
    pending = Invitation.objects.filter(project__organization=project.organization, status="pending")
    invited = ", ".join(f"{i.user.get_username()} to {i.project.key}" for i in pending) or "none"
    return (
        f"project {project.key} ({project.name}) in {project.organization.name}: "
        f"{kinds['milestone']} milestones, {kinds['epic']} epics, {kinds['ticket']} tickets, "
        f"{dependencies} dependencies, runnable: {runnable}; {entries} knowledge entries; "
        f"skills: {skills or 'none'}; {proposed} changeset(s) awaiting review; "
        f"{waiting} open question(s) from agents; claimed: {claimed}; invitations waiting: {invited}."
    )
