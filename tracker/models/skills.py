"""Skills: versioned SKILL.md documents of an organization or a project, and pins."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tracker.models.access import Organization, Project


class SkillScope(models.TextChoices):
    ORGANIZATION = "organization"
    PROJECT = "project"


class Skill(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="skills")
    # Set for project-scoped skills only.
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="skills"
    )
    name = models.SlugField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"],
                condition=models.Q(project__isnull=True),
                name="skill_org_name_unique",
            ),
            models.UniqueConstraint(fields=["project", "name"], name="skill_project_name_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope})"

    @property
    def scope(self) -> str:
        return SkillScope.PROJECT if self.project_id else SkillScope.ORGANIZATION


class SkillVersion(models.Model):
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    body = models.TextField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["skill", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "version"], name="skill_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.skill.name} v{self.version}"


class SkillPin(models.Model):
    """A project uses ``skill`` at ``version`` instead of its latest."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="skill_pins")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="pins")
    version = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "skill"], name="skill_pin_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.project.key} pins {self.skill.name} v{self.version}"
