"""Users and their roles in the admin: a role changes through the audited service, and the groups that
are the roles keep their names (a renamed group would silently take a role away)."""

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.forms import UserChangeForm
from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy as _

from registry.roles import ROLES
from registry.services.tokens import user_roles_set

User = get_user_model()


class UserRolesForm(UserChangeForm):
    roles = forms.MultipleChoiceField(
        choices=[(role, role) for role in ROLES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("What the README's role table allows; each change is audited."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["roles"].initial = list(
                self.instance.groups.filter(name__in=ROLES).values_list("name", flat=True)
            )


def _without_groups(fieldsets):
    return tuple(
        (name, {**options, "fields": tuple(f for f in options["fields"] if f != "groups")})
        for name, options in fieldsets
    )


admin.site.unregister(User)


@admin.register(User)
class EvalHubUserAdmin(UserAdmin):
    form = UserRolesForm
    fieldsets = (*_without_groups(UserAdmin.fieldsets), ("Roles", {"fields": ("roles",)}))
    list_filter = ("is_staff", "is_superuser", "is_active", "groups")

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        user_roles_set(user=form.instance, roles=form.cleaned_data["roles"], actor=request.user)


admin.site.unregister(Group)


@admin.register(Group)
class EvalHubGroupAdmin(GroupAdmin):
    def has_change_permission(self, request, obj=None) -> bool:
        return (obj is None or obj.name not in ROLES) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return (obj is None or obj.name not in ROLES) and super().has_delete_permission(request, obj)
